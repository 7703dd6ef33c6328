-- promote_run (needs priority.lua, one_per_key.lua): the promoter moves a due scheduled run to
-- queued and pushes it to ready (by its priority, see priority.lua); a run
-- the rate limit held goes to the claim end: its turn has come. A debounced run
-- closes its window (one_per_key.lua): later calls start a new run.
-- KEYS: run, queue scheduled, status:scheduled, status:queued, queue ready,
--       queue prioritized, queue priority sequence
-- ARGV: run id, now ms
-- Returns "promoted" | "not_due" | "missing" | "stale".
local run_key, queue_scheduled_key, scheduled_key, queued_key, ready_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prioritized_key, priority_seq_key = KEYS[6], KEYS[7]
local run_id, now = ARGV[1], ARGV[2]

local score = redis.call("zscore", queue_scheduled_key, run_id)
if not score then
  return "missing"
end
if tonumber(score) > tonumber(now) then
  return "not_due"
end
redis.call("zrem", queue_scheduled_key, run_id)
local run = redis.call("hmget", run_key, "status", "priority", "heldBy", "debounceKey")
if run[1] ~= "scheduled" then
  return "stale"
end
redis.call("zrem", scheduled_key, run_id)
redis.call("hset", run_key, "status", "queued")
redis.call("hdel", run_key, "availableAt")
let_go(run[4], run_id)
redis.call("zadd", queued_key, now, run_id)
if run[3] == "rate" then
  redis.call("rpush", ready_key, run_id)
else
  push_ready(ready_key, prioritized_key, priority_seq_key, run_id, run[2])
end
return "promoted"
