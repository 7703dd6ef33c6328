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

-- A run whose output stream is written or read (the run field streamEnabled, read by the
-- caller with the status) ended: add the asyncio package's end entry to its signal stream
-- (keys.Keys.run_stream_signal), which wakes every reader blocked on it, this package's and
-- that one's. ``pass``: the run's streamActivePass (1 for the runs this package executes).
-- A run nobody streams or reads costs nothing.
local function announce_end(run_key, streamed, pass, final, at)
  if streamed then
    local record = '{"kind":"signal","pass":' .. math.max(1, math.floor(tonumber(pass) or 1)) .. ',"reason":"terminal","status":"' .. final .. '","ts":' .. at .. '}'
    redis.call("xadd", run_key .. ":stream:signal", "MAXLEN", "~", 64, "*", "record", record)
  end
end
