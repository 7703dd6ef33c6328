-- Helper (needs status.lua): flow control. A run's limits are in its
-- limitsJson field (redflow/core/flow.py writes it, and says its shape):
-- "w" the workflow's running counter (the asyncio package's), "h" its set of
-- held runs, "i" the held index, "q"/"s" its queue's ready list and scheduled
-- zset, "c" its concurrency limits [units set ("" = the counter), held list,
-- limit], "r" its rate limit [window zset, cursor key, limit, period ms].
-- Units: a run holds one unit of each concurrency limit exactly while it is
-- running: taken by the start that moves it queued -> running, given back by
-- the script that moves it out of running (settle, cancel), atomically with
-- that move, so exactly once. A crashed worker's run stays running, keeps
-- its units and is recovered by the reaper: no unit leaks, and no other run
-- is let in while a stalled worker may still be executing it.
-- Held runs are put aside, not failed and not spun on: one that a concurrency
-- limit holds waits (queued) in that limit's held list and is moved back to
-- ready when a unit is given back; one the rate limit holds waits scheduled
-- (heldBy = "rate") until the window has room, and the promoter wakes it.

local function scope_of(run_prefix)
  return string.sub(run_prefix, 1, #run_prefix - 4)  -- run_prefix ends with "run:"
end

local function is_key(value, scope)
  return type(value) == "string" and string.sub(value, 1, #scope) == scope
end

local function is_count(value)
  return type(value) == "number" and value >= 1
end

-- The limits of a run, or nil: none, or not a record of this scope (the
-- worker then fails the run; a corrupt field must never break a claim).
local function limits_of(raw, scope)
  if not raw or raw == "" then
    return nil
  end
  local ok, spec = pcall(cjson.decode, raw)
  if not ok or type(spec) ~= "table" then
    return nil
  end
  for _, name in ipairs({"w", "h", "i", "q", "s"}) do
    if not is_key(spec[name], scope) then
      return nil
    end
  end
  if type(spec.c) ~= "table" then
    return nil
  end
  for _, entry in ipairs(spec.c) do
    if type(entry) ~= "table" or not (entry[1] == "" or is_key(entry[1], scope)) or not is_key(entry[2], scope)
        or not is_count(entry[3]) then
      return nil
    end
  end
  local rate = spec.r
  if rate ~= nil and (type(rate) ~= "table" or not is_key(rate[1], scope) or not is_key(rate[2], scope)
      or not is_count(rate[3]) or not is_count(rate[4])) then
    return nil
  end
  return spec
end

-- How many runs of ``workflow`` are running, by the running index (what the
-- counter holds; the asyncio package counts a missing counter the same way).
local function count_running(counter_key, running_key, run_prefix, workflow)
  local count = 0
  for _, id in ipairs(redis.call("zrange", running_key, 0, -1)) do
    if redis.call("hget", run_prefix .. id, "workflow") == workflow then
      count = count + 1
    end
  end
  redis.call("set", counter_key, count)
  return count
end

-- How many units of one concurrency limit are taken.
local function units_used(spec, entry, running_key, run_prefix, workflow)
  if entry[1] == "" then
    return tonumber(redis.call("get", spec.w)) or count_running(spec.w, running_key, run_prefix, workflow)
  end
  return redis.call("scard", entry[1])
end

-- The first concurrency limit of ``spec`` with no unit free, or nil.
local function full_limit(spec, running_key, run_prefix, workflow)
  for _, entry in ipairs(spec.c) do
    if units_used(spec, entry, running_key, run_prefix, workflow) >= entry[3] then
      return entry
    end
  end
  return nil
end

-- Redis's clock in ms. The rate limit records and compares starts by it, not
-- by the ``now`` a worker sent: a worker frozen between preparing a call and
-- sending it sends a time that lags by the freeze, and a start recorded in
-- the past would leave the window early (letting more than the limit in).
local function server_ms()
  local time = redis.call("time")
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- nil when the rate limit lets a run start at ``now``, else the ms it is due.
-- The window holds one entry per start of the last period (a sliding log, so
-- no window of the period ever holds more than the limit). Runs that found it
-- full are spaced period/limit apart after the cursor (the due time of the
-- last one held), and a run arriving while some wait queues behind them; a
-- held run whose time came (``woken``) only needs room.
local function rate_due(rate, now, woken)
  local window, cursor_key, limit, period = rate[1], rate[2], rate[3], rate[4]
  redis.call("zremrangebyscore", window, "-inf", now - period)
  local used = redis.call("zcard", window)
  local cursor = woken and 0 or (tonumber(redis.call("get", cursor_key)) or 0)
  if used < limit and cursor <= now then
    return nil
  end
  local due = now
  if used >= limit then
    local oldest = redis.call("zrange", window, used - limit, used - limit, "WITHSCORES")
    due = tonumber(oldest[2]) + period
  end
  if not woken then
    due = math.max(due, cursor + math.floor(period / limit))
    redis.call("set", cursor_key, due, "PX", due - now + period)
  end
  return due
end

-- Move up to ``count`` runs of a held list back to the claim end of their
-- ready list; entries that are no longer queued (canceled) are dropped.
local function wake_held(held_key, run_prefix, count)
  local moved, scope = 0, scope_of(run_prefix)
  for _ = 1, count + 16 do
    if moved >= count then
      break
    end
    local run_id = redis.call("lpop", held_key)
    if not run_id then
      break
    end
    local run = redis.call("hmget", run_prefix .. run_id, "status", "limitsJson")
    local spec = run[1] == "queued" and limits_of(run[2], scope)
    if spec then
      redis.call("rpush", spec.q, run_id)
      moved = moved + 1
    end
  end
  return moved
end

-- A run held by limit ``full`` may have been woken by another of its limits,
-- whose free unit it cannot use: wake a run waiting for each of those, so
-- that no free unit is left with runs waiting for it (they then move to the
-- held list of what holds them, so this ends).
local function pass_on(s, spec, full)
  local workflow = s.run["workflow"] or ""
  for _, entry in ipairs(spec.c) do
    if entry ~= full and redis.call("llen", entry[2]) > 0
        and units_used(spec, entry, s.index["running"], s.run_prefix, workflow) < entry[3] then
      wake_held(entry[2], s.run_prefix, 1)
    end
  end
end

-- Put a claimed run aside: out of processing, its lease given up.
local function put_aside(processing_key, lease_key, run_id)
  redis.call("lrem", processing_key, 1, run_id)
  redis.call("del", lease_key)
end

-- Flow control at the start of a queued run with limits: nil when it may
-- start (its units are taken, its start is counted, and ``fields`` gets what
-- the run hash must record), else the reply of a run held back. ``stored``:
-- fields to write on a held run too (limits the worker computed).
local function admit(s, spec, stored, fields)
  local run, run_id, workflow = s.run, s.run_id, s.run["workflow"] or ""
  local held_by = run["heldBy"] or ""
  local full = full_limit(spec, s.index["running"], s.run_prefix, workflow)
  if full then
    put_aside(s.processing_key, s.lease_key, run_id)
    if #spec.c > 1 then
      pass_on(s, spec, full)
    end
    redis.call("rpush", full[2], run_id)
    redis.call("hset", spec.i, full[2], cjson.encode({u = full[1], w = spec.w, l = full[3], n = workflow}))
    redis.call("sadd", spec.h, run_id)
    if held_by == "" then
      table.insert(stored, "heldBy")
      table.insert(stored, "limit")
    end
    if #stored > 0 then
      redis.call("hset", s.run_key, unpack(stored))
    end
    return {"held", "queued", workflow, ""}
  end
  if spec.r then
    local now = server_ms()
    local due = rate_due(spec.r, now, held_by == "rate")
    if due then
      put_aside(s.processing_key, s.lease_key, run_id)
      if #spec.c > 0 then
        pass_on(s, spec, nil)
      end
      table.insert(stored, "availableAt")
      table.insert(stored, due)
      table.insert(stored, "heldBy")
      table.insert(stored, "rate")
      move_status(s.run_key, s.index, run_id, "queued", "scheduled", s.now, stored)
      redis.call("zadd", spec.s, due, run_id)
      redis.call("sadd", spec.h, run_id)
      return {"held", "scheduled", workflow, tostring(due)}
    end
    redis.call("zadd", spec.r[1], now, run_id .. ":" .. s.attempt)
    redis.call("pexpire", spec.r[1], spec.r[4])
  end
  for _, entry in ipairs(spec.c) do
    if entry[1] ~= "" then
      redis.call("sadd", entry[1], run_id)
    end
  end
  redis.call("incr", spec.w)
  for _, value in ipairs(stored) do
    table.insert(fields, value)
  end
  if held_by ~= "" then
    redis.call("srem", spec.h, run_id)
    table.insert(fields, "heldBy")
    table.insert(fields, "")
  end
  return nil
end

-- start_claimed's flow control for a queued run (``s``: its context): nil
-- when it may start, else the reply to return. A run without limits whose
-- workflow the worker knows to be limited (``limited``: "\n"-separated names)
-- was enqueued by a client that did not compute them: it is handed back
-- ("admit") for the worker to compute them and start it again with them
-- (``supplied``; "-" for none).
local function flow_start(s, fields, limited, supplied)
  local raw, stored = s.run["limitsJson"], {}
  if not raw or raw == "" then
    if supplied == "-" then
      return nil
    elseif supplied ~= "" then
      raw = supplied
      stored = {"limitsJson", supplied}
    elseif limited ~= "" and string.find(limited, "\n" .. (s.run["workflow"] or "") .. "\n", 1, true) then
      redis.call("del", s.lease_key)
      return {"admit", "queued", s.run["workflow"], s.run["inputJson"] or ""}
    else
      return nil
    end
  end
  local spec = limits_of(raw, scope_of(s.run_prefix))
  if not spec then
    return nil
  end
  return admit(s, spec, stored, fields)
end

-- A run with limits (``raw``) leaves running: give its units back and wake one
-- held run of each of its concurrency limits.
local function release_units(raw, run_id, run_prefix)
  local spec = limits_of(raw, scope_of(run_prefix))
  if not spec then
    return
  end
  if redis.call("decr", spec.w) < 0 then
    redis.call("set", spec.w, 0)
  end
  for _, entry in ipairs(spec.c) do
    if entry[1] ~= "" then
      redis.call("srem", entry[1], run_id)
    end
    wake_held(entry[2], run_prefix, 1)
  end
end

-- A cancel ends a run: a running one gives its units back; one held by a
-- limit leaves its held lists (``held_by``: its heldBy field), and one woken
-- but not started yet (in none of them) passes its wake on.
local function flow_cancel(prev, raw, held_by, run_id, run_prefix)
  if prev == "running" then
    release_units(raw, run_id, run_prefix)
  elseif held_by and held_by ~= "" then
    local spec = limits_of(raw, scope_of(run_prefix))
    if spec then
      for _, entry in ipairs(spec.c) do
        if redis.call("lrem", entry[2], 0, run_id) == 0 and prev == "queued" then
          wake_held(entry[2], run_prefix, 1)
        end
      end
      redis.call("srem", spec.h, run_id)
    end
  end
end
