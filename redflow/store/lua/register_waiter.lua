-- register_waiter (needs clock.lua): put a run's ``step.wait_for_event`` in
-- the event's waiter index, stamped with when its entry first existed
-- (``since``, Redis ms). A scheduled event reaches only the waits begun
-- before it fired, so the stamp of a wait must not move: the same wait
-- registered again (a replay, the hourly look) keeps its entry and stamp; a
-- different wait of the run (a later step) replaces it with a new stamp.
-- KEYS: event waiters
-- ARGV: run id, the entry's head (EventWaiter.head: its JSON up to the
--       since, without the closing brace)
-- Returns 1 if the entry was written, 0 if that wait's entry was there.
local waiters_key, run_id, head = KEYS[1], ARGV[1], ARGV[2]

local mark = head .. ',"since":'
local current = redis.call("hget", waiters_key, run_id)
if current and string.sub(current, 1, #mark) == mark then
  return 0
end
redis.call("hset", waiters_key, run_id, mark .. server_now_ms() .. "}")
return 1
