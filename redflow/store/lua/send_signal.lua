-- send_signal (needs status.lua, waits.lua): buffer a signal for one run,
-- in one call on the run's slot: the status check and the write are one
-- step, so a signal is never stored for a run that has ended. The buffer
-- (keys.Keys.run_signals, a hash) keeps, per signal name, a queue: field
-- "t:<name>" counts the signals sent, "h:<name>" those taken, and
-- "<n>:<name>" holds the n-th one's payload JSON; "n" counts every signal
-- waiting in the run. A wait takes the oldest of its name (take_signal.lua).
-- A run parked in a wait for this name (parkedFor "signal", its parked
-- step's waiting record naming the signal) goes to ready at once.
-- KEYS: run, signals, the six status zsets, steps, queue scheduled, queue ready
-- ARGV: run id, signal name, payload JSON, now ms, most waiting per name, most waiting per run
-- Returns "woken" (stored; the run was parked waiting for it: now in ready)
-- | "stored" | "finished" (the run ended: nothing stored) | "missing" (no
-- such run: nothing stored) | "full" (as many signals wait as allowed: nothing stored).
local run_key, signals_key = KEYS[1], KEYS[2]
local index = status_keys(3)
local steps_key, queue_scheduled_key, ready_key = KEYS[9], KEYS[10], KEYS[11]
local run_id, name, payload, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local most_per_name, most_per_run = tonumber(ARGV[5]), tonumber(ARGV[6])

local run = redis.call("hmget", run_key, "status", "parkedFor", "parkedStep")
local status, parked_for, parked_step = run[1], run[2], run[3]
if not status then
  return "missing"
end
if TERMINAL[status] then
  return "finished"
end
local counts = redis.call("hmget", signals_key, "t:" .. name, "h:" .. name, "n")
local sent, taken, waiting = tonumber(counts[1]) or 0, tonumber(counts[2]) or 0, tonumber(counts[3]) or 0
if sent - taken >= most_per_name or waiting >= most_per_run then
  return "full"
end
redis.call("hset", signals_key, "t:" .. name, sent + 1, (sent + 1) .. ":" .. name, payload, "n", waiting + 1)
if status == "scheduled" and parked_for == "signal" and parked_step then
  local ok, record = pcall(cjson.decode, redis.call("hget", steps_key, parked_step) or "")
  local wait = ok and type(record) == "table" and (record.wait or record[7])  -- an object, or an array record (compat)
  if type(wait) == "table" and wait.signal == name then
    wake_parked(run_key, index, run_id, queue_scheduled_key, ready_key, now)
    return "woken"
  end
end
return "stored"
