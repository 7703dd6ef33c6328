-- save_step (needs owns.lua, step_records.lua): record one step if this attempt still owns
-- the run, and return the run's cancelRequestedAt so that a step boundary
-- notices a cancel for free. How ownership is checked depends on how fresh
-- the caller knows its lease to be (engine/fence.py):
-- - fresh (``check lease`` "0": written less than half a lease ago, so the
--   lease key cannot have expired): the run's hash fence alone, as the
--   settle checks it: still running, under this attempt's token (every
--   start writes it, so no other attempt took the run over). A first-time
--   step is then this FCALL, its HMGET and its HSET: 3 commands.
-- - otherwise (``check lease`` "1"), and for a marker: owns() reads the lease
--   (see owns), and the lease is extended (a run that makes progress keeps
--   its lease even if the keeper is late). A fresh caller whose hash fence
--   does not hold takes this path too, so it answers as the full check does.
-- With a marker startedAt (a step still going), only writes the "running"
-- record if no record of that execution (or a success) is there already.
-- With an expected record (a durable wait ending), only writes while the
-- step's record is still exactly that one: an event may have resolved it
-- meanwhile. A record may be an object (DATA_MODEL.md) or the asyncio
-- package's array ([status code, seq, attempt, startedAt | payload, ...],
-- core/step_arrays.py); with a blob, its @blob: reference's blob is written
-- with it. Further records may follow (records sent behind, engine/step_records.py:
-- the steps an attempt ran since its last call), written with the first under
-- the same fence.
-- KEYS: steps, lease, run
-- ARGV: lease token, step name, step JSON, marker startedAt or "", lease ms, expected record or "",
--       blob field and value ("" "" for none), check lease ("1" | "0"),
--       then per further record: step name, step JSON, blob field, blob ("" "" for none)
-- Returns {"saved" | "kept" | "stale", cancelRequestedAt, "", renewed}, or {"changed",
-- cancelRequestedAt, the record found instead of the expected one, renewed}; renewed is
-- "1" when the lease was extended (its keeper may count it as a renewal), else "".
local steps_key, lease_key, run_key = KEYS[1], KEYS[2], KEYS[3]
local token, name, step_json, marker, lease_ms, expected = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] or ""
local blob_field, blob, check_lease = ARGV[7] or "", ARGV[8], ARGV[9] ~= "0"

local run = redis.call("hmget", run_key, "status", "cancelRequestedAt", "leaseToken")
local renewed = ""
if check_lease or marker ~= "" or run[1] ~= "running" or run[3] ~= token then
  if not owns(lease_key, token, run[1], run[3], lease_ms, marker == "") then
    return {"stale", ""}
  end
  redis.call("pexpire", lease_key, lease_ms)
  renewed = "1"
end
local cancel_at = run[2] or ""
if marker ~= "" then
  local current = redis.call("hget", steps_key, name)
  if current then
    local ok, record = pcall(cjson.decode, current)
    if ok and type(record) == "table" and (record.status == "succeeded" or record[1] == 1 or
      tostring(record.startedAt or (record[1] == 0 and record[4])) == marker) then
      return {"kept", cancel_at, "", renewed}
    end
  end
end
if expected ~= "" then
  local current = redis.call("hget", steps_key, name)
  if current ~= expected then
    return {"changed", cancel_at, current or "", renewed}
  end
end
if blob_field ~= "" then
  redis.call("hset", run_key .. ":blobs", blob_field, blob)
end
redis.call("hset", steps_key, name, step_json)
if #ARGV > 9 then
  save_records(run_key, steps_key, ARGV, 10, (#ARGV - 9) / 4)
end
return {"saved", cancel_at, "", renewed}
