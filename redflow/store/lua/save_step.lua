-- save_step (needs owns.lua): record one step if this attempt still owns
-- the run (see owns), and extend the lease (a run that makes progress keeps
-- its lease even if the keeper is late); returns the run's
-- cancelRequestedAt so that a step boundary notices a cancel for free. With
-- a marker startedAt (a step still going), only writes the "running" record
-- if no record of that execution (or a success) is there already. With an
-- expected record (a durable wait ending), only writes while the step's
-- record is still exactly that one: an event may have resolved it meanwhile.
-- A record may be an object (DATA_MODEL.md) or the asyncio package's array
-- ([status code, seq, attempt, startedAt | payload, ...], core/step_arrays.py);
-- with a blob, its @blob: reference's blob is written with it.
-- KEYS: steps, lease, run
-- ARGV: lease token, step name, step JSON, marker startedAt or "", lease ms, expected record or "",
--       blob field and value ("" "" for none)
-- Returns {"saved" | "kept" | "stale", cancelRequestedAt}, or
-- {"changed", cancelRequestedAt, the record found instead of the expected one}.
local steps_key, lease_key, run_key = KEYS[1], KEYS[2], KEYS[3]
local token, name, step_json, marker, lease_ms, expected = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] or ""
local blob_field, blob = ARGV[7] or "", ARGV[8]

local run = redis.call("hmget", run_key, "status", "cancelRequestedAt", "leaseToken")
if not owns(lease_key, token, run[1], run[3], lease_ms, marker == "") then
  return {"stale", ""}
end
redis.call("pexpire", lease_key, lease_ms)
local cancel_at = run[2] or ""
if marker ~= "" then
  local current = redis.call("hget", steps_key, name)
  if current then
    local ok, record = pcall(cjson.decode, current)
    if ok and type(record) == "table" and (record.status == "succeeded" or record[1] == 1 or
      tostring(record.startedAt or (record[1] == 0 and record[4])) == marker) then
      return {"kept", cancel_at}
    end
  end
end
if expected ~= "" then
  local current = redis.call("hget", steps_key, name)
  if current ~= expected then
    return {"changed", cancel_at, current or ""}
  end
end
if blob_field ~= "" then
  redis.call("hset", run_key .. ":blobs", blob_field, blob)
end
redis.call("hset", steps_key, name, step_json)
return {"saved", cancel_at}
