-- take_run (needs status.lua, limits.lua, priority.lua, start.lua, claim.lua):
-- claim and start the next run of a queue in one call: move it from ready to
-- processing and start it (a run a limit holds back is put aside on the way).
-- KEYS: queue ready
-- ARGV: lease token, lease ms, now ms, scope (keys.Keys.scope: the status
--       zsets and run keys are built from it), queue prefix
--       (keys.Keys.queue_prefix: processing and prioritized are built from it),
--       limited workflows ("\n"-separated, see limits.lua), "1" if the
--       caller's BLMOVE moved the priority marker into processing
-- Returns {} when nothing was started, else {run id, start reply (see start.lua),
-- runs left in ready} (the worker sends that many more idle slots at most).
local ready_key = KEYS[1]
local token, lease_ms, now, scope, queue_prefix, limited, marker_moved = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7] == "1"
local processing_key = queue_prefix .. "processing"

if marker_moved then
  return_marker(ready_key, processing_key)
end
local run_id, reply = claim_and_start(ready_key, processing_key, queue_prefix .. "prioritized", scope .. "run:", status_index(scope), token, lease_ms, now, limited)
if not run_id then
  return {}
end
return {run_id, reply, redis.call("llen", ready_key)}
