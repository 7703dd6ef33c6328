-- deliver_event (needs status.lua, waits.lua): resolve a run's
-- ``step.wait_for_event`` with an emitted payload, at most once: the step's
-- record must still be exactly the waiting record the waiter index names.
-- It becomes the succeeded record (the payload is the step's output), and a
-- run parked in that step goes to ready.
-- KEYS: run, the six status zsets, steps, queue scheduled, queue ready
-- ARGV: run id, step name, waiting record, succeeded record, now ms
-- Returns "resumed" (it was parked: now in ready) | "delivered" (it is
-- running: it finds the record when it parks, or, its worker dead, when it
-- runs again) | "done" (that wait ended already) | "pending" (running, its
-- waiting record not stored: an entry written before its record, which
-- versions before issue 28 did; the entry is kept) | "gone".
local run_key = KEYS[1]
local index = status_keys(2)
local steps_key, queue_scheduled_key, ready_key = KEYS[8], KEYS[9], KEYS[10]
local run_id, step, waiting, resolved, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local current = redis.call("hget", steps_key, step)
if current ~= waiting then
  if current then
    return "done"
  end
  local status = redis.call("hget", run_key, "status")
  if not status then
    return "gone"
  end
  return status == "running" and "pending" or "done"
end
redis.call("hset", steps_key, step, resolved)
local run = redis.call("hmget", run_key, "status", "parkedStep")
if run[1] == "scheduled" and run[2] == step then
  wake_parked(run_key, index, run_id, queue_scheduled_key, ready_key, now)
  return "resumed"
end
return "delivered"
