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

-- The asyncio package's clients (0.1.2 and later) wait for a run's end on its
-- terminal stream (XREAD, no polling): a run with the ``parentRunId`` field
-- (they always write it; our client does with compat="redflow-0.1", and on
-- child runs) gets its entry there when it ends. Other runs cost nothing:
-- ``parent_field`` is the field as the caller's HMGET read it (false: absent).
-- The stream lives as long as the wake-up token: its waiters read the run
-- before they block, so only those blocked when it ends need it, and a
-- stream of one entry holds about 4 KB (Redis 7.0), more than the run itself.
local function tell_terminal(run_key, parent_field, final, at, wake_ttl)
  if parent_field then
    local key = run_key .. ":terminal"
    redis.call("xadd", key, "MAXLEN", "~", 1, "*", "status", final, "finishedAt", at)
    redis.call("pexpire", key, wake_ttl)
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
