-- start_run (needs status.lua, limits.lua, start.lua): start a run a worker
-- moved into processing itself (BLMOVE on an empty queue, or the inline child
-- assist), or again with the limits the worker computed for it ("admit").
-- KEYS: queue processing
-- ARGV: run id, lease token, lease ms, now ms, scope (keys.Keys.scope: the
--       status zsets and run keys are built from it), limited workflows
--       ("\n"-separated, see limits.lua), limits the worker computed
--       ("" none given, "-" the run has none, else its limitsJson)
-- Returns what start_claimed returns (see start.lua).
local processing_key = KEYS[1]
local run_id, token, lease_ms, now, scope, limited, supplied = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

return start_claimed(scope .. "run:", processing_key, status_index(scope), run_id, token, lease_ms, now, limited, supplied)
