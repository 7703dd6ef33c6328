-- enqueue_run (needs priority.lua): create a run and enqueue it, or return
-- the run its idempotency key holds. A run with a "priority" field > 0 waits
-- in the prioritized zset (priority.lua) instead of the ready list.
-- KEYS: run, runs:created, status:queued, status:scheduled, workflow-runs,
--       queue ready, queue scheduled, idempotency key (the run key when none),
--       queue prioritized, queue priority sequence,
--       then any indexes the run joins with score createdAt (a tagged run's tag indexes)
-- ARGV: run id, workflow, queue, inputJson, createdAt ms,
--       availableAt ms (<= createdAt: now), maxAttempts, "1" if idempotent,
--       idempotency ttl s, run id the key may be replaced from (a failed,
--       canceled or missing run the client saw), parentRunId ("" for none),
--       the blob field and value an inputJson that is a @blob: reference names ("" "" for none),
--       then any more field/value pairs to store on the run (features' fields)
-- Returns {"created", run id} | {"existing", run id}.
local run_key, created_key, queued_key, scheduled_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local workflow_runs_key, ready_key, queue_scheduled_key, idem_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local run_id, workflow, queue, input_json, created_at = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local available_at, max_attempts, idempotent, idem_ttl = ARGV[6], ARGV[7], ARGV[8] == "1", ARGV[9]
local replace_id, parent_run_id, blob_field, blob = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local prioritized_key, priority_seq_key = KEYS[9], KEYS[10]
local index_keys = {unpack(KEYS, 11)}
local extra = {unpack(ARGV, 14)}  -- features' field/value pairs
local priority = nil
for i = 1, #extra - 1, 2 do
  if extra[i] == "priority" then
    priority = extra[i + 1]
  end
end

if idempotent then
  local current = redis.call("get", idem_key)
  if current and current ~= "" and current ~= replace_id then
    redis.call("expire", idem_key, idem_ttl)
    return {"existing", current}
  end
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
if #ARGV > 13 then
  redis.call("hset", run_key, unpack(ARGV, 14))
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
