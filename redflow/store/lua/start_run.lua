-- start_run (needs status.lua): start a claimed run: take its lease, load it,
-- queued -> running (+1 attempt, startedAt on first pickup) and load its
-- step cache, in one trip. Idempotent for the same token, so a retried call
-- after a lost reply does not drop the run.
-- KEYS: run, steps, lease, queue processing, the six status zsets
-- ARGV: run id, lease token, lease ms, now ms
-- Returns {"busy"} | {"missing"} | {"skip", status, workflow}
--       | {"cancel", status, workflow} | {"started", run fields, step fields}.
local run_key, steps_key, lease_key, processing_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local index = status_keys(5)
local run_id, token, lease_ms, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local holder = redis.call("get", lease_key)
if holder and holder ~= token then
  -- Another attempt holds the run. Its processing entry stays: it may be
  -- the only one (the holder retook a lapsed lease after a reaper moved its
  -- own entry), and recovery finds the run through it if the holder dies.
  -- The holder's settle removes every entry of the run.
  return {"busy"}
end
local resumed = holder == token
redis.call("set", lease_key, token, "PX", lease_ms)
local function drop(reply)
  redis.call("del", lease_key)
  redis.call("lrem", processing_key, 0, run_id)
  return reply
end
local run = redis.call("hmget", run_key, "status", "workflow", "cancelRequestedAt", "startedAt")
local status, workflow, cancel_at, started_at = run[1], run[2] or "", run[3], run[4]
if not status then
  return drop({"missing"})
end
if status ~= "queued" and status ~= "running" then
  return drop({"skip", status, workflow})
end
if cancel_at and cancel_at ~= "" then
  return {"cancel", status, workflow}
end
local first_pickup = not started_at or started_at == ""
if status == "queued" and not resumed then
  move_status(run_key, index, run_id, "queued", "running", now, first_pickup and {"startedAt", now} or nil)
  redis.call("hincrby", run_key, "attempt", 1)
elseif first_pickup then
  redis.call("hset", run_key, "startedAt", now)
end
return {"started", redis.call("hgetall", run_key), redis.call("hgetall", steps_key)}
