-- schedule_tick: the cron leader is done with one tick of a schedule, or a
-- trigger started a run of it. The run started (if any) becomes the
-- schedule's last run unless one started later is recorded already; the
-- schedule moves on to its next tick only if the tick done is still its
-- current one (an update, pause, resume or delete in between wins), so a
-- leader that lost the lock meanwhile moves nothing twice.
-- KEYS: the schedule's hash, schedules:next
-- ARGV: schedule id, the tick done (its ms; "" for a trigger: no tick moves),
--       run id ("" when the tick started none), when that run started (ms),
--       next tick ms and its due ms ("" for none: it leaves the next index),
--       ticks counted as fired (0 or 1), as missed, as skipped for overlap,
--       why the tick started no run ("" when it did)
-- A schedule without a current tick (paused) leaves the next index whatever the call.
-- Returns "ok", "moved" (not the current tick: only the run was recorded) or "gone".
local hash_key, next_key = KEYS[1], KEYS[2]
local id, done, run_id, run_at, tick, due = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local fired, late, overlapped, err = ARGV[7], ARGV[8], ARGV[9], ARGV[10]

if redis.call("exists", hash_key) == 0 then
  redis.call("zrem", next_key, id)
  return "gone"
end
local current = redis.call("hget", hash_key, "tickMs") or ""
if current == "" then
  redis.call("zrem", next_key, id)
end
if run_id ~= "" then
  local last_at = tonumber(redis.call("hget", hash_key, "lastRunAt") or "") or -1
  if tonumber(run_at) >= last_at then
    redis.call("hset", hash_key, "lastRunId", run_id, "lastRunAt", run_at)
  end
end
if done == "" then
  return "ok"
end
if current ~= done then
  return "moved"
end

redis.call("hincrby", hash_key, "fired", fired)
redis.call("hincrby", hash_key, "skippedLate", late)
redis.call("hincrby", hash_key, "skippedOverlap", overlapped)
redis.call("hset", hash_key, "lastTickMs", done, "lastError", err, "tickMs", tick, "dueMs", due)
if tick == "" then
  redis.call("zrem", next_key, id)
else
  redis.call("zadd", next_key, due, id)
end
return "ok"
