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
-- (Tables are filled by index, not table.insert: this runs for every run.)
local function finalize(run_key, index, run_id, prev, final, at, output_json, error_json, extra, cleanup)
  local fields, stale
  if final == "succeeded" then
    fields, stale = {"finishedAt", at, "outputJson", output_json}, "errorJson"
  elseif error_json ~= "" then
    fields, stale = {"finishedAt", at, "errorJson", error_json}, "outputJson"
  else
    fields, stale = {"finishedAt", at}, "outputJson"
  end
  local n = #fields
  for i = 1, #extra do
    fields[n + i] = extra[i]
  end
  move_status(run_key, index, run_id, prev, final, at, fields)
  if cleanup then
    redis.call("hdel", run_key, "availableAt", stale)
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
