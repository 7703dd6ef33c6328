-- claim_inline: take a still-queued child run out of ready into processing,
-- so that its parent's greenlet runs it (the seed's inline assist).
-- KEYS: queue ready, queue processing, run
-- ARGV: run id
-- Returns 1 if claimed, else 0.
local ready_key, processing_key, run_key, run_id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if redis.call("hget", run_key, "status") ~= "queued" then
  return 0
end
if redis.call("lrem", ready_key, 1, run_id) <= 0 then
  return 0
end
redis.call("lpush", processing_key, run_id)
return 1
