-- save_step (needs owns.lua): record one step if this attempt still owns
-- the run (see owns), and extend the lease (a run that makes progress keeps
-- its lease even if the keeper is late); returns the run's
-- cancelRequestedAt so that a step boundary notices a cancel for free. With
-- a marker startedAt (a step still going), only writes the "running" record
-- if no record of that execution (or a success) is there already.
-- KEYS: steps, lease, run
-- ARGV: lease token, step name, step JSON, marker startedAt or "", lease ms
-- Returns {"saved" | "kept" | "stale", cancelRequestedAt}.
local steps_key, lease_key, run_key = KEYS[1], KEYS[2], KEYS[3]
local token, name, step_json, marker, lease_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

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
    if ok and type(record) == "table" and
      (record.status == "succeeded" or tostring(record.startedAt) == marker) then
      return {"kept", cancel_at}
    end
  end
end
redis.call("hset", steps_key, name, step_json)
return {"saved", cancel_at}
