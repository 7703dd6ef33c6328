-- settle_run (needs status.lua, owns.lua, finalize.lua): end one attempt:
-- finalize (succeeded / failed / canceled) or schedule a retry, remove the
-- run from processing and release the lease, in one trip. Refuses when this
-- attempt no longer owns the run (see owns), and never finalizes a run
-- twice: a repeated call finds it terminal and changes nothing.
-- KEYS: run, the six status zsets, queue processing, lease, done, queue scheduled
-- ARGV: run id, status (succeeded|failed|canceled|scheduled), now ms,
--       outputJson, errorJson, lease token, wake ttl ms, retry at ms, lease ms
-- Returns the status the run ended in, "stale" or "missing".
local run_key = KEYS[1]
local index = status_keys(2)
local processing_key, lease_key, done_key, queue_scheduled_key = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local run_id, requested, now, output_json, error_json = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local token, wake_ttl, retry_at, lease_ms = ARGV[6], ARGV[7], ARGV[8], ARGV[9]

local function release(reply)
  redis.call("lrem", processing_key, 0, run_id)
  if redis.call("get", lease_key) == token then
    redis.call("del", lease_key)
  end
  return reply
end
local run = redis.call("hmget", run_key, "status", "cancelRequestedAt")
local prev, cancel_at = run[1], run[2]
if not prev then
  return release("missing")
end
if TERMINAL[prev] then
  return release(prev)
end
if not owns(lease_key, token, prev, processing_key, run_id, lease_ms, true) then
  return "stale"
end
if requested == "scheduled" then
  if cancel_at and cancel_at ~= "" then
    requested = "canceled"
  else
    move_status(run_key, index, run_id, prev, "scheduled", now, {"availableAt", retry_at, "errorJson", error_json})
    redis.call("zadd", queue_scheduled_key, retry_at, run_id)
    return release("scheduled")
  end
end
local final = finalize(run_key, index, done_key, run_id, prev, requested, cancel_at, now, output_json, error_json, wake_ttl)
if prev == "scheduled" then
  redis.call("zrem", queue_scheduled_key, run_id)
end
return release(final)
