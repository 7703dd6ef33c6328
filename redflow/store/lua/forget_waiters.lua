-- forget_waiters: drop entries of an event's waiter index, each only while
-- it still holds the entry the caller saw (a run that resumed and waits on
-- the same event again has written a new one, which must stay). The caller
-- gives the entry it read, or the head of the wait it ended
-- (EventWaiter.head: the entry up to its stamp, register_waiter.lua).
-- KEYS: event waiters
-- ARGV: run id, entry or head, run id, entry or head, ...
-- Returns how many entries were dropped.
local waiters_key, entries = KEYS[1], ARGV

local dropped = 0
for i = 1, #entries, 2 do
  local run_id, entry = entries[i], entries[i + 1]
  local current = redis.call("hget", waiters_key, run_id)
  local mark = entry .. ',"since":'
  if current and (current == entry or string.sub(current, 1, #mark) == mark) then
    dropped = dropped + redis.call("hdel", waiters_key, run_id)
  end
end
return dropped
