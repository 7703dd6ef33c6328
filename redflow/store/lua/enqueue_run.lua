-- enqueue_run (needs priority.lua, status.lua): create a run and enqueue it, or return
-- the run its idempotency key holds. A run with a "priority" field > 0 waits
-- in the prioritized zset (priority.lua) instead of the ready list.
-- A singleton (core/singleton.py): the key names the unfinished run that holds it;
-- "skip" returns that run (counting the call on it, skippedCalls), "replace" returns
-- it as a conflict unless it is the run the caller canceled (replace from), and a key
-- naming a finished or gone run is free. A debounce: the window names a run still
-- scheduled (never started, not held) in the call's queue: the call moves its due time to created at +
-- period (at most its createdAt + max wait, and not past its deadlineAt), gives it this
-- call's input (and limits), moves its startBy with it, and counts it (collapsedCalls;
-- both counts also per workflow in the one-run-calls hash, for metrics);
-- else this call's run opens the window. Either way the new run is then created and
-- the key or window names it; whoever ends, promotes, cancels or purges the run lets
-- go of it (one_per_key.lua). The check comes before the idempotency key is written:
-- a call that is skipped or collapsed leaves no key naming a run that never was.
-- KEYS: run, runs:created, status:queued, status:scheduled, workflow-runs,
--       queue ready, queue scheduled, idempotency key (the run key when none),
--       queue prioritized, queue priority sequence, singleton key or debounce window
--       (the run key when none), the calls skipped / collapsed counts (Keys.one_run_calls),
--       then any indexes the run joins with score createdAt (a tagged run's tag indexes)
-- ARGV: run id, workflow, queue, inputJson, createdAt ms,
--       availableAt ms (<= createdAt: now), maxAttempts, "1" if idempotent,
--       idempotency ttl s, run id the key may be replaced from (a failed,
--       canceled or missing run the client saw), parentRunId ("" for none),
--       the blob field and value an inputJson that is a @blob: reference names ("" "" for none),
--       policy ("" | "skip" | "replace" | "debounce"), the run a "replace" may take the key from,
--       debounce period ms, debounce max wait ms ("0": none),
--       then any more field/value pairs to store on the run (features' fields)
-- Returns {"created", run id} | {"existing", run id} (its idempotency key's)
--       | {"skipped", run id} | {"conflict", run id} (singleton) | {"collapsed", run id} (debounce).
local run_key, created_key, queued_key, scheduled_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local workflow_runs_key, ready_key, queue_scheduled_key, idem_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local run_id, workflow, queue, input_json, created_at = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local available_at, max_attempts, idempotent, idem_ttl = ARGV[6], ARGV[7], ARGV[8] == "1", ARGV[9]
local replace_id, parent_run_id, blob_field, blob = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local prioritized_key, priority_seq_key, policy_key, calls_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local policy, replace_from, period, max_wait = ARGV[14], ARGV[15], tonumber(ARGV[16]), tonumber(ARGV[17])
local index_keys = {unpack(KEYS, 13)}
local extra = {unpack(ARGV, 18)}  -- features' field/value pairs
local priority, limits_json = nil, nil
for i = 1, #extra - 1, 2 do
  if extra[i] == "priority" then
    priority = extra[i + 1]
  elseif extra[i] == "limitsJson" then
    limits_json = extra[i + 1]
  end
end

if idempotent then
  local current = redis.call("get", idem_key)
  if current and current ~= "" and current ~= replace_id then
    redis.call("expire", idem_key, idem_ttl)
    return {"existing", current}
  end
end
if policy ~= "" then
  local holder = redis.call("get", policy_key)
  local holder_key = holder and string.sub(run_key, 1, #run_key - #run_id) .. holder
  if policy == "debounce" and holder then
    local run = redis.call("hmget", holder_key, "status", "attempt", "createdAt", "startWithinMs", "deadlineAt", "heldBy", "queue")
    if run[1] == "scheduled" and (run[2] == "0" or not run[2]) and not run[6] and run[7] == queue then  -- (a call to another queue: its own run)
      local due = tonumber(created_at) + period
      if max_wait > 0 then
        due = math.min(due, (tonumber(run[3]) or tonumber(created_at)) + max_wait)
      end
      due = math.min(due, tonumber(run[5]) or due)
      redis.call("hset", holder_key, "inputJson", input_json, "availableAt", due)
      if tonumber(run[4]) then
        redis.call("hset", holder_key, "startBy", due + tonumber(run[4]))
      end
      if limits_json then
        redis.call("hset", holder_key, "limitsJson", limits_json)
      end
      if blob_field ~= "" then
        redis.call("hset", holder_key .. ":blobs", blob_field, blob)
      end
      redis.call("hincrby", holder_key, "collapsedCalls", 1)
      redis.call("hincrby", calls_key, workflow .. ":collapsed", 1)
      redis.call("zadd", queue_scheduled_key, due, holder)
      return {"collapsed", holder}
    end
  elseif holder then
    local status = redis.call("hget", holder_key, "status")
    if status and not TERMINAL[status] then
      if policy == "skip" then
        redis.call("hincrby", holder_key, "skippedCalls", 1)
        redis.call("hincrby", calls_key, workflow .. ":skipped", 1)
        return {"skipped", holder}
      elseif holder ~= replace_from then
        return {"conflict", holder}
      end
    end
  end
  redis.call("set", policy_key, run_id)
end
if idempotent then
  redis.call("set", idem_key, run_id, "EX", idem_ttl)
end
local scheduled = tonumber(available_at) > tonumber(created_at)
local status = scheduled and "scheduled" or "queued"
redis.call("hset", run_key,
  "workflow", workflow, "queue", queue, "status", status, "inputJson", input_json,
  "attempt", "0", "maxAttempts", max_attempts, "createdAt", created_at,
  "cancelRequestedAt", "", "cancelReason", "")
if parent_run_id ~= "" then
  redis.call("hset", run_key, "parentRunId", parent_run_id)
end
if #ARGV > 17 then
  redis.call("hset", run_key, unpack(ARGV, 18))
end
if blob_field ~= "" then  -- the asyncio package's large-payload form, with its reference
  redis.call("hset", run_key .. ":blobs", blob_field, blob)
end
redis.call("zadd", created_key, created_at, run_id)
redis.call("zadd", workflow_runs_key, created_at, run_id)
for _, key in ipairs(index_keys) do
  redis.call("zadd", key, created_at, run_id)
end
if scheduled then
  redis.call("hset", run_key, "availableAt", available_at)
  redis.call("zadd", scheduled_key, created_at, run_id)
  redis.call("zadd", queue_scheduled_key, available_at, run_id)
else
  redis.call("zadd", queued_key, created_at, run_id)
  push_ready(ready_key, prioritized_key, priority_seq_key, run_id, priority)
end
return {"created", run_id}
