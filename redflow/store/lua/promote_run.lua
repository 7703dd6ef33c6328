-- promote_run: the promoter moves a due scheduled run to queued and pushes
-- it to ready.
-- KEYS: run, queue scheduled, status:scheduled, status:queued, queue ready
-- ARGV: run id, now ms
-- Returns "promoted" | "not_due" | "missing" | "stale".
local run_key, queue_scheduled_key, scheduled_key, queued_key, ready_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local run_id, now = ARGV[1], ARGV[2]

local score = redis.call("zscore", queue_scheduled_key, run_id)
if not score then
  return "missing"
end
if tonumber(score) > tonumber(now) then
  return "not_due"
end
redis.call("zrem", queue_scheduled_key, run_id)
if redis.call("hget", run_key, "status") ~= "scheduled" then
  return "stale"
end
redis.call("zrem", scheduled_key, run_id)
redis.call("hset", run_key, "status", "queued")
redis.call("hdel", run_key, "availableAt")
redis.call("zadd", queued_key, now, run_id)
redis.call("lpush", ready_key, run_id)
return "promoted"
