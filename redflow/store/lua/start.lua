-- Helper (needs status.lua, waits.lua, limits.lua): start a run already moved into processing.
-- Take its lease (SET NX GET: one command reads the holder and takes it),
-- read the run once, queued -> running (+1 attempt, startedAt on first
-- pickup, the attempt's lease token kept in the run hash as its fence), and
-- load the step cache only when an earlier attempt may have stored steps.
-- Idempotent for the same token, so a retried call after a lost reply does
-- not drop the run. ``run_prefix`` .. id is the run's key (keys.Keys.run_prefix).
-- A queued run with limits may be held back instead (limits.lua's flow_start;
-- ``limited`` and ``supplied`` are its arguments).
-- Returns {"busy"} | {"missing"} | {"skip", status, workflow}
--       | {"cancel", status, workflow} | {"started", run fields, step fields, attempt}
--       | {"held", status, workflow, due ms or ""} | {"admit", status, workflow, inputJson}.
local function run_keys(run_prefix, run_id)
  local run_key = run_prefix .. run_id
  return run_key, run_key .. ":steps", run_key .. ":lease"
end

local function start_claimed(run_prefix, processing_key, index, run_id, token, lease_ms, now, limited, supplied)
  local run_key, steps_key, lease_key = run_keys(run_prefix, run_id)
  local holder = redis.call("set", lease_key, token, "NX", "PX", lease_ms, "GET")
  if holder and holder ~= token then
    -- Another attempt holds the run. Its processing entry stays: it may be
    -- the only one (the holder retook a lapsed lease after a reaper moved its
    -- own entry), and recovery finds the run through it if the holder dies.
    return {"busy"}
  end
  local resumed = holder == token
  if resumed then
    redis.call("pexpire", lease_key, lease_ms)
  end
  local flat = redis.call("hgetall", run_key)
  local run = {}
  for i = 1, #flat, 2 do
    run[flat[i]] = flat[i + 1]
  end
  local status, workflow = run["status"], run["workflow"] or ""
  if status ~= "queued" and status ~= "running" then
    redis.call("del", lease_key)
    redis.call("lrem", processing_key, 0, run_id)
    if not status then
      return {"missing"}
    end
    return {"skip", status, workflow}
  end
  if run["cancelRequestedAt"] and run["cancelRequestedAt"] ~= "" then
    redis.call("hset", run_key, "leaseToken", token)  -- the fence of the settle that cancels it
    return {"cancel", status, workflow}
  end
  -- A count that is not a number is left as it is, for the worker to report.
  local raw_attempt = run["attempt"]
  local counted = (raw_attempt == nil or raw_attempt == "") and 0 or tonumber(raw_attempt)
  local before = counted or 0
  local attempt = before
  local fields = {"leaseToken", token}
  if not run["startedAt"] or run["startedAt"] == "" then
    table.insert(fields, "startedAt")
    table.insert(fields, now)
  end
  if status == "queued" and not resumed then
    local parked = run["parkedFor"] and run["parkedFor"] ~= ""  -- waits.lua: a parked run resumes its attempt
    if counted and not parked then
      attempt = before + 1
      table.insert(fields, "attempt")
      table.insert(fields, tostring(attempt))
    end
    if run["limitsJson"] or limited ~= "" or supplied ~= "" then  -- flow control: nothing to do for other runs
      local held = flow_start({run = run, run_id = run_id, run_key = run_key, lease_key = lease_key, processing_key = processing_key,
        index = index, run_prefix = run_prefix, now = tonumber(now), attempt = attempt}, fields, limited, supplied)
      if held then
        return held
      end
    end
    if parked then
      resume_parked(run_key)  -- clears its marks, now that it runs again
    end
    move_status(run_key, index, run_id, "queued", "running", now, fields)
  else
    redis.call("hset", run_key, unpack(fields))
  end
  local steps = {}
  if before > 0 then  -- steps exist only after an attempt started the run: every worker counts them
    steps = redis.call("hgetall", steps_key)
  end
  return {"started", flat, steps, tostring(math.max(attempt, 1))}
end
