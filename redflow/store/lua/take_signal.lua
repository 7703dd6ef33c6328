-- take_signal (needs owns.lua, waits.lua): a ``step.wait_for_signal`` looks
-- for its signal, if this attempt still owns the run (see owns; the lease
-- is extended, as a step record extends it). In one call: the oldest
-- signal of the name (send_signal.lua) leaves the buffer and becomes the
-- step's succeeded record (its payload the output), so a signal is taken
-- once and a replay finds it in the record; none waiting and the wait's
-- timeout passed, the record is a success with output null; else the
-- step's waiting record is stored (kept if there). A step already
-- succeeded, or a cancel pending, takes nothing.
-- KEYS: steps, lease, run, signals
-- ARGV: lease token, step name, signal name, waiting record, the succeeded
--       record's text before and after its outputJson value, timeout at ms
--       ("" for none), now ms, lease ms
-- Returns {"taken" | "timeout" | "done", cancelRequestedAt, the step's record}
-- | {"waiting" | "canceled" | "stale", cancelRequestedAt}.
local steps_key, lease_key, run_key, signals_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, step, name, waiting, before, after = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local timeout_at, now, lease_ms = ARGV[7], ARGV[8], ARGV[9]

local run = redis.call("hmget", run_key, "status", "cancelRequestedAt", "leaseToken")
if not owns(lease_key, token, run[1], run[3], lease_ms, true) then
  return {"stale", ""}
end
redis.call("pexpire", lease_key, lease_ms)
local cancel_at = run[2] or ""
local current = redis.call("hget", steps_key, step)
if step_succeeded(current) then
  return {"done", cancel_at, current}
end
if cancel_at ~= "" then
  return {"canceled", cancel_at}
end
local counts = redis.call("hmget", signals_key, "t:" .. name, "h:" .. name)
local sent, taken = tonumber(counts[1]) or 0, tonumber(counts[2]) or 0
if sent > taken then
  local field = (taken + 1) .. ":" .. name
  local payload = redis.call("hget", signals_key, field) or "null"
  if taken + 1 == sent then
    redis.call("hdel", signals_key, field, "t:" .. name, "h:" .. name)
  else
    redis.call("hdel", signals_key, field)
    redis.call("hset", signals_key, "h:" .. name, taken + 1)
  end
  if redis.call("hincrby", signals_key, "n", -1) <= 0 then
    redis.call("del", signals_key)
  end
  local record = before .. cjson.encode(payload) .. after
  redis.call("hset", steps_key, step, record)
  return {"taken", cancel_at, record}
end
if timeout_at ~= "" and tonumber(now) >= tonumber(timeout_at) then
  local record = before .. '"null"' .. after
  redis.call("hset", steps_key, step, record)
  return {"timeout", cancel_at, record}
end
if current ~= waiting then
  redis.call("hset", steps_key, step, waiting)
end
return {"waiting", cancel_at}
