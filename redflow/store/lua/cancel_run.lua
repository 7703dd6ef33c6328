-- cancel_run (needs status.lua, finalize.lua, terminal_index.lua, limits.lua, one_per_key.lua): a client's cancel.
-- A queued or scheduled run is canceled at once, and so is a running one
-- whose lease is gone (nobody is executing it: its worker died or stalled;
-- a stalled one is refused at its next write). A running run whose lease is
-- held gets cancelRequestedAt and a cancel notice (kept a minute), and its worker stops it. A run canceled at
-- once leaves the prioritized zset, a held list, or (running) gives its
-- units back (limits.lua), and its end is announced to its stream's readers (finalize.lua),
-- and in its terminal stream if it has a ``parentRunId`` field (finalize.lua's tell_terminal);
-- it lets go of its singleton key or debounce window (one_per_key.lua).
-- KEYS: run, the six status zsets, done, queue scheduled, lease, queue processing, queue prioritized,
--       cancel notices, then the run's failed / canceled index pairs (terminal_index.lua)
-- ARGV: run id, now ms, reason, errorJson, wake ttl ms, run key prefix
-- Returns "canceled" | "requested" | "terminal" | "missing".
local run_key = KEYS[1]
local index = status_keys(2)
local done_key, queue_scheduled_key, lease_key, processing_key, prioritized_key = KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local notices_key = KEYS[13]
local run_id, now, reason, error_json, wake_ttl, run_prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local run = redis.call("hmget", run_key, "status", "waiters", "priority", "limitsJson", "heldBy", "streamEnabled", "streamActivePass",
  "parentRunId", "singletonKey", "debounceKey")
local prev, waiters = run[1], run[2]
if not prev then
  return "missing"
end
if TERMINAL[prev] then
  return "terminal"
end
redis.call("hset", run_key, "cancelRequestedAt", now, "cancelReason", reason)
local unheld = prev == "running" and redis.call("exists", lease_key) == 0
if prev == "queued" or prev == "scheduled" or unheld then
  finalize(run_key, index, run_id, prev, "canceled", now, "", error_json, {}, true)
  index_terminal(14, "canceled", run_id, now)
  announce_end(run_key, run[6], run[7], "canceled", now)
  tell_terminal(run_key, run[8], "canceled", now, wake_ttl)
  wake_waiters(done_key, waiters, wake_ttl)
  redis.call("zrem", queue_scheduled_key, run_id)
  if unheld then
    redis.call("lrem", processing_key, 0, run_id)
  end
  if run[3] and prev == "queued" then
    redis.call("zrem", prioritized_key, run_id)
  end
  if run[4] then
    flow_cancel(prev, run[4], run[5], run_id, run_prefix)
  end
  let_go(run[9], run_id)
  let_go(run[10], run_id)
  return "canceled"
end
-- the worker's lease keeper reads the notices once a tick (not every running run's hash)
redis.call("zadd", notices_key, now, run_id)
redis.call("zremrangebyscore", notices_key, "-inf", tonumber(now) - 60000)
redis.call("pexpire", notices_key, 60000)
return "requested"
