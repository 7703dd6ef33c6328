-- Helper (needs status.lua, waits.lua, limits.lua): start a run already moved into processing.
-- Take its lease (SET NX GET: one command reads the holder and takes it),
-- read the run once, queued -> running (+1 attempt, startedAt on first
-- pickup, the attempt's lease token kept in the run hash as its fence), and
-- load the step cache only when an earlier attempt may have stored steps.
-- Idempotent for the same token, so a retried call after a lost reply does
-- not drop the run. ``run_prefix`` .. id is the run's key (keys.Keys.run_prefix).
-- A queued run with limits may be held back instead (limits.lua's flow_start;
-- ``limited`` and ``supplied`` are its arguments).
-- A run past a deadline (deadlines.py: startBy while it never started,
-- deadlineAt) is not started: the caller fails it (it runs on_failure first).
-- An input or step record that refers to a blob (the asyncio package's
-- @blob: references, core/blobs.py) has its blobs read here too; no command
-- for a run without.
-- Returns {"busy"} | {"missing"} | {"skip", status, workflow}
--       | {"cancel", status, workflow} | {"started", run fields, step fields, attempt[, blob fields, their values]}
--       | {"expired", status, workflow, "start" | "timeout", run fields}
--       | {"held", status, workflow, due ms or ""} | {"admit", status, workflow, inputJson}.
-- Every field of a run as a table (flow control reads more of them).
local function hash_table(flat)
  local run = {}
  for i = 1, #flat, 2 do
    run[flat[i]] = flat[i + 1]
  end
  return run
end

-- The blob hash fields the run's input and step records refer to, and their
-- values (false: missing), read only when one of them holds a reference.
local function referred_blobs(run_key, input_json, steps)
  local fields = {}
  if input_json and string.byte(input_json, 1) == 64 and string.sub(input_json, 1, 6) == "@blob:" then  -- 64: "@"
    fields[1] = string.sub(input_json, 7)
  end
  for i = 2, #steps, 2 do
    if string.find(steps[i], "@blob:", 1, true) then
      for field in string.gmatch(steps[i], '"@blob:([^"\\]+)"') do
        fields[#fields + 1] = field
      end
    end
  end
  if #fields == 0 then
    return nil
  end
  return fields, redis.call("hmget", run_key .. ":blobs", unpack(fields))
end

local function start_claimed(run_prefix, processing_key, index, run_id, token, lease_ms, now, limited, supplied)
  local run_key = run_prefix .. run_id
  local lease_key = run_key .. ":lease"
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
  -- The fields decided on, picked from the reply (no table of them: this runs for every run).
  local status, workflow, cancel_at, raw_attempt, started_at, parked_for, limits_json, start_by, deadline_at, input_json
  for i = 1, #flat, 2 do
    local name = flat[i]
    if name == "status" then status = flat[i + 1]
    elseif name == "inputJson" then input_json = flat[i + 1]
    elseif name == "workflow" then workflow = flat[i + 1]
    elseif name == "attempt" then raw_attempt = flat[i + 1]
    elseif name == "cancelRequestedAt" then cancel_at = flat[i + 1]
    elseif name == "startedAt" then started_at = flat[i + 1]
    elseif name == "parkedFor" then parked_for = flat[i + 1]
    elseif name == "limitsJson" then limits_json = flat[i + 1]
    elseif name == "startBy" then start_by = flat[i + 1]
    elseif name == "deadlineAt" then deadline_at = flat[i + 1]
    end
  end
  workflow = workflow or ""
  if status ~= "queued" and status ~= "running" then
    redis.call("del", lease_key)
    redis.call("lrem", processing_key, 0, run_id)
    if not status then
      return {"missing"}
    end
    return {"skip", status, workflow}
  end
  if cancel_at and cancel_at ~= "" then
    redis.call("hset", run_key, "leaseToken", token)  -- the fence of the settle that cancels it
    return {"cancel", status, workflow}
  end
  if start_by or deadline_at then  -- deadlines: runs without them skip this
    local late
    if start_by and (not started_at or started_at == "") and tonumber(now) > (tonumber(start_by) or math.huge) then
      late = "start"
    elseif deadline_at and tonumber(now) >= (tonumber(deadline_at) or math.huge) then
      late = "timeout"
    end
    if late then
      if parked_for and parked_for ~= "" then
        resume_parked(run_key)  -- it does not wait any more
      end
      redis.call("hset", run_key, "leaseToken", token)  -- the fence of the settle that fails it
      return {"expired", status, workflow, late, flat}
    end
  end
  -- A count that is not a number is left as it is, for the worker to report.
  local counted = (raw_attempt == nil or raw_attempt == "") and 0 or tonumber(raw_attempt)
  local before = counted or 0
  local attempt = before
  local fields = {"leaseToken", token}
  if not started_at or started_at == "" then
    fields[3], fields[4] = "startedAt", now
  end
  if status == "queued" and not resumed then
    local parked = parked_for and parked_for ~= ""  -- waits.lua: a parked run resumes its attempt
    if counted and not parked then
      attempt = before + 1
      fields[#fields + 1] = "attempt"
      fields[#fields + 1] = tostring(attempt)
    end
    if limits_json or limited ~= "" or supplied ~= "" then  -- flow control: nothing to do for other runs
      local held = flow_start({run = hash_table(flat), run_id = run_id, run_key = run_key, lease_key = lease_key, processing_key = processing_key,
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
    steps = redis.call("hgetall", run_key .. ":steps")
  end
  local blob_fields, blob_values = referred_blobs(run_key, input_json, steps)
  if blob_fields then
    return {"started", flat, steps, tostring(math.max(attempt, 1)), blob_fields, blob_values}
  end
  return {"started", flat, steps, tostring(math.max(attempt, 1))}
end
