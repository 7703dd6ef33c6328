-- take_run (needs status.lua, start.lua): claim and start the next run of a
-- queue in one call: move it from ready to processing and start it.
-- KEYS: queue ready, queue processing, the six status zsets
-- ARGV: lease token, lease ms, now ms, run key prefix
-- Returns {} when the queue is empty, else {run id, start reply} (see start.lua).
local ready_key, processing_key = KEYS[1], KEYS[2]
local index = status_keys(3)
local token, lease_ms, now, run_prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local run_id = redis.call("lmove", ready_key, processing_key, "RIGHT", "LEFT")
if not run_id then
  return {}
end
return {run_id, start_claimed(run_prefix, processing_key, index, run_id, token, lease_ms, now)}
