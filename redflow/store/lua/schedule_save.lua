-- schedule_save: an operator's change to one schedule (client.schedules):
-- create, update, pause, resume or delete it; refused whole when the id is
-- taken (create) or missing (the others). A paused schedule has no next tick
-- and no entry in the next index; resuming gives it the tick passed.
-- KEYS: the schedule's hash, schedules (ids), schedules:next
-- ARGV: action (create | update | pause | resume | delete), schedule id,
--       now ms, next tick ms and its due ms ("" on update: keep the current tick),
--       then field/value pairs of its definition (create, update)
-- Returns "ok", "exists" (create), "missing" (the others), or "unchanged"
-- (pause of a paused schedule, resume of an active one).
local hash_key, ids_key, next_key = KEYS[1], KEYS[2], KEYS[3]
local action, id, now, tick, due = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local exists = redis.call("exists", hash_key) == 1
if action == "create" then
  if exists then
    return "exists"
  end
  redis.call("hset", hash_key, "createdAt", now, "pausedAt", "", "tickMs", "", "dueMs", "",
    "lastTickMs", "", "lastRunId", "", "lastRunAt", "", "lastError", "",
    "fired", "0", "skippedLate", "0", "skippedOverlap", "0")
  redis.call("zadd", ids_key, now, id)
elseif not exists then
  return "missing"
end

if action == "delete" then
  redis.call("del", hash_key)
  redis.call("zrem", ids_key, id)
  redis.call("zrem", next_key, id)
  return "ok"
end

local paused = (redis.call("hget", hash_key, "pausedAt") or "") ~= ""
if action == "pause" then
  if paused then
    return "unchanged"
  end
  redis.call("hset", hash_key, "pausedAt", now, "tickMs", "", "dueMs", "")
  redis.call("zrem", next_key, id)
  return "ok"
end
if action == "resume" then
  if not paused then
    return "unchanged"
  end
  redis.call("hset", hash_key, "pausedAt", "")
  paused = false
end

if #ARGV > 5 then
  redis.call("hset", hash_key, "updatedAt", now, unpack(ARGV, 6))
end
if tick ~= "" and not paused then
  redis.call("hset", hash_key, "tickMs", tick, "dueMs", due)
  redis.call("zadd", next_key, due, id)
end
return "ok"
