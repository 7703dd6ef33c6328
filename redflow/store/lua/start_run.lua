-- start_run (needs status.lua, limits.lua, start.lua): start a run a worker
-- moved into processing itself (BLMOVE on an empty queue, or the inline child
-- assist), or again with the limits the worker computed for it ("admit").
-- KEYS: queue processing, the six status zsets
-- ARGV: run id, lease token, lease ms, now ms, run key prefix, limited
--       workflows ("\n"-separated, see limits.lua), limits the worker computed
--       ("" none given, "-" the run has none, else its limitsJson)
-- Returns what start_claimed returns (see start.lua).
local processing_key = KEYS[1]
local index = status_keys(2)
local run_id, token, lease_ms, now, run_prefix, limited, supplied = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

return start_claimed(run_prefix, processing_key, index, run_id, token, lease_ms, now, limited, supplied)
