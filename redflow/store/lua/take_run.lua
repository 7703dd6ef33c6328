-- take_run (needs status.lua, limits.lua, priority.lua, start.lua, claim.lua):
-- claim and start the next run of a queue in one call: move it from ready to
-- processing and start it (a run a limit holds back is put aside on the way).
-- KEYS: queue ready, queue processing, the six status zsets, queue prioritized
-- ARGV: lease token, lease ms, now ms, run key prefix, limited workflows
--       ("\n"-separated, see limits.lua), "1" if the caller's BLMOVE moved the
--       priority marker into processing
-- Returns {} when nothing was started, else {run id, start reply} (see start.lua).
local ready_key, processing_key = KEYS[1], KEYS[2]
local index = status_keys(3)
local prioritized_key = KEYS[9]
local token, lease_ms, now, run_prefix, limited, marker_moved = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] == "1"

if marker_moved then
  return_marker(ready_key, processing_key)
end
local run_id, reply = claim_and_start(ready_key, processing_key, prioritized_key, run_prefix, index, token, lease_ms, now, limited)
if not run_id then
  return {}
end
return {run_id, reply}
