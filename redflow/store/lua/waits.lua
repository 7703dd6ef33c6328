-- Helper (needs status.lua): runs parked by a durable wait (engine/waits.py).
-- A parked run is ``scheduled`` with parkedFor (sleep | event | children |
-- signal) and parkedStep; what it waits for is the ``running`` record of that step.
-- It resumes where it was: the start that picks it up again does not count
-- a new attempt.
local PARKED_FIELDS = {"parkedFor", "parkedStep", "awaitingChildren"}

-- At the start (start.lua) of a run that was parked (a resume, not a new
-- attempt: start.lua tells from parkedFor): clear its marks. Never called
-- for a run that never parked.
local function resume_parked(run_key)
  redis.call("hdel", run_key, unpack(PARKED_FIELDS))
end

-- A parked run whose wait ended before its wake time (an event delivered,
-- the last awaited child ended) goes to ready now.
local function wake_parked(run_key, index, run_id, queue_scheduled_key, ready_key, now)
  redis.call("zrem", queue_scheduled_key, run_id)
  redis.call("hdel", run_key, "availableAt")
  move_status(run_key, index, run_id, "scheduled", "queued", now)
  redis.call("lpush", ready_key, run_id)
end

-- Whether the run's signal buffer (keys.Keys.run_signals: the run key +
-- ":signals") holds a signal of ``name`` not taken yet (send_signal.lua).
local function signal_pending(run_key, name)
  local counts = redis.call("hmget", run_key .. ":signals", "t:" .. name, "h:" .. name)
  return (tonumber(counts[1]) or 0) > (tonumber(counts[2]) or 0)
end

-- Whether a stored step record is a success (a wait resolved meanwhile).
local function step_succeeded(raw)
  if not raw then
    return false
  end
  local ok, record = pcall(cjson.decode, raw)
  return ok and type(record) == "table" and (record.status == "succeeded" or record[1] == 1)  -- an object, or an array record
end

-- The settle of an attempt that parks (settle_run.lua, after its fence
-- checks): store the step's waiting record, and move the run to scheduled
-- until ``wake_at`` with its lease released; or to ready at once when the
-- wait is over already (its step was resolved meanwhile, every awaited
-- child has ended, or a signal it waits for was sent since its step looked).
-- ``args`` from ``first``: reason, step name, waiting record, wake at ms,
-- then for children: the number n of children seen running, their n ids,
-- and the ids of children seen ended; for a signal: its name.
-- Returns "parked" | "woken".
local function park_run(run_key, index, run_id, prev, lease_key, queue_scheduled_key, ready_key, now, args, first)
  local reason, step, record, wake_at = args[first], args[first + 1], args[first + 2], args[first + 3]
  local steps_key = run_key .. ":steps"
  redis.call("del", lease_key)
  local over = step_succeeded(redis.call("hget", steps_key, step))
  if not over then
    redis.call("hset", steps_key, step, record)
  end
  local fields = {"parkedFor", reason, "parkedStep", step, "leaseToken", ""}
  if reason == "children" and not over then
    local ended_key = run_key .. ":children-ended"
    local running = tonumber(args[first + 4]) or 0
    local pending = 0
    for i = first + 5, first + 4 + running do
      if redis.call("sismember", ended_key, args[i]) == 0 then
        pending = pending + 1
      end
    end
    for i = first + 5 + running, #args do
      redis.call("sadd", ended_key, args[i])
    end
    over = pending == 0
    table.insert(fields, "awaitingChildren")
    table.insert(fields, tostring(pending))
  elseif reason == "signal" and not over then
    over = signal_pending(run_key, args[first + 4])
  end
  if over then
    move_status(run_key, index, run_id, prev, "queued", now, fields)
    redis.call("lpush", ready_key, run_id)
    return "woken"
  end
  table.insert(fields, "availableAt")
  table.insert(fields, wake_at)
  move_status(run_key, index, run_id, prev, "scheduled", now, fields)
  redis.call("zadd", queue_scheduled_key, wake_at, run_id)
  return "parked"
end
