-- Helper (needs status.lua): turn a run terminal, and wake its waiters.
-- A cancel request wins over succeeded/failed, as in the seed's finalizeRun.

local function final_status(requested, cancel_at)
  if requested ~= "canceled" and cancel_at and cancel_at ~= "" then
    return "canceled"
  end
  return requested
end

-- ``extra``: more field/value pairs for the same HSET; ``cleanup``: the run
-- may hold fields of an earlier attempt (errorJson, availableAt) to delete.
local function finalize(run_key, index, run_id, prev, final, at, output_json, error_json, extra, cleanup)
  local fields = {"finishedAt", at}
  local stale = {"availableAt", "outputJson"}
  if final == "succeeded" then
    table.insert(fields, "outputJson")
    table.insert(fields, output_json)
    stale = {"availableAt", "errorJson"}
  elseif error_json ~= "" then
    table.insert(fields, "errorJson")
    table.insert(fields, error_json)
  end
  for _, value in ipairs(extra) do
    table.insert(fields, value)
  end
  move_status(run_key, index, run_id, prev, final, at, fields)
  if cleanup then
    redis.call("hdel", run_key, unpack(stale))
  end
end

-- A client waiting for the run's result flagged it (the ``waiters`` field):
-- push the wake-up token it blocks on. Nobody waiting costs nothing.
local function wake_waiters(done_key, waiters, wake_ttl)
  if waiters and waiters ~= "" then
    redis.call("rpush", done_key, "1")
    redis.call("pexpire", done_key, wake_ttl)
  end
end
