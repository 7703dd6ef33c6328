-- retry_run (needs status.lua, terminal_index.lua, priority.lua): a manual retry.
-- A failed or canceled run goes back to queued under the same id, so its
-- succeeded steps replay; it gets a fresh attempt budget. A running run that
-- nobody holds (no lease: its worker died or stalled) goes to the claim end
-- of ready as it is, as the reaper would move it, which also frees a run
-- some older version left in no list at all. The lease a finished attempt
-- left to expire is deleted, so that the retried run starts at once (by its
-- priority; its limits apply again when it starts). A run with deadlines
-- (startWithinMs, timeoutMs: deadlines.py) gets them afresh, counted from
-- now, as it gets fresh attempts. Its terminal stream (finalize.lua's
-- tell_terminal) goes too: a waiter of the asyncio package reads it from
-- the start, and would take the old end for the new one. A singleton run takes its key
-- again (it is unfinished again), unless another unfinished run holds it: then the
-- retry is refused ("held"), as the key allows one unfinished run.
-- KEYS: run, the six status zsets, queue ready, done, lease, queue processing,
--       queue prioritized, queue priority sequence,
--       then the run's failed / canceled index pairs (terminal_index.lua), which it leaves
-- ARGV: run id, now ms
-- Returns {"queued" | "requeued" | "not_retryable" | "held" | "missing", previous status}
-- ("not_retryable" with "running" means a live worker holds the run).
local run_key = KEYS[1]
local index = status_keys(2)
local ready_key, done_key, lease_key, processing_key = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local prioritized_key, priority_seq_key = KEYS[12], KEYS[13]
local run_id, now = ARGV[1], ARGV[2]

local prev = redis.call("hget", run_key, "status")
if not prev then
  return {"missing", ""}
end
if prev == "running" and redis.call("exists", lease_key) == 0 then
  redis.call("hset", run_key, "cancelRequestedAt", "", "cancelReason", "", "leaseToken", "")
  redis.call("lrem", processing_key, 0, run_id)
  redis.call("rpush", ready_key, run_id)
  return {"requeued", prev}
end
if prev ~= "failed" and prev ~= "canceled" then
  return {"not_retryable", prev}
end
local singleton_key = redis.call("hget", run_key, "singletonKey")
if singleton_key then
  local holder = redis.call("get", singleton_key)
  if holder and holder ~= run_id then
    local status = redis.call("hget", string.sub(run_key, 1, #run_key - #run_id) .. holder, "status")
    if status and not TERMINAL[status] then
      return {"held", prev}
    end
  end
  redis.call("set", singleton_key, run_id)
end
local attempt = tonumber(redis.call("hget", run_key, "attempt")) or 0
local budget = tonumber(redis.call("hget", run_key, "maxAttempts")) or 1
if budget < 1 then budget = 1 end
move_status(run_key, index, run_id, prev, "queued", now)
unindex_terminal(14, run_id)
redis.call("hdel", run_key, "finishedAt", "errorJson", "outputJson", "availableAt", "waiters", "leaseToken", "heldBy", "deadlineExceeded")
redis.call("hset", run_key, "cancelRequestedAt", "", "cancelReason", "", "maxAttempts", tostring(attempt + budget))
local within, timeout = unpack(redis.call("hmget", run_key, "startWithinMs", "timeoutMs"))
if tonumber(within) then
  redis.call("hset", run_key, "startBy", tostring(tonumber(now) + tonumber(within)))
end
if tonumber(timeout) then
  redis.call("hset", run_key, "deadlineAt", tostring(tonumber(now) + tonumber(timeout)))
end
redis.call("del", done_key, lease_key, run_key .. ":terminal")
push_ready(ready_key, prioritized_key, priority_seq_key, run_id, redis.call("hget", run_key, "priority"))
return {"queued", prev}
