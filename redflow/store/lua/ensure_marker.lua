-- ensure_marker (needs priority.lua): the sweeper's check that a queue with
-- prioritized runs has its marker in ready or processing. A worker that knows
-- nothing of priorities (another client's) drops the marker as an entry with
-- no run; without this, the runs it stood for would wait for the next
-- prioritized enqueue.
-- KEYS: queue ready, queue processing, queue prioritized
-- ARGV: none
-- Returns 1 if a marker was pushed, else 0.
local ready_key, processing_key, prioritized_key = KEYS[1], KEYS[2], KEYS[3]
if redis.call("zcard", prioritized_key) == 0 then
  return 0
end
if redis.call("lpos", ready_key, PRIORITY_MARKER) or redis.call("lpos", processing_key, PRIORITY_MARKER) then
  return 0
end
redis.call("rpush", ready_key, PRIORITY_MARKER)
return 1
