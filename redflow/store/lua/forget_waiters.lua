-- forget_waiters: drop entries of an event's waiter index, each only while
-- it still holds the entry the caller saw (a run that resumed and waits on
-- the same event again has written a new one, which must stay).
-- KEYS: event waiters
-- ARGV: run id, entry, run id, entry, ...
-- Returns how many entries were dropped.
local waiters_key, entries = KEYS[1], ARGV

local dropped = 0
for i = 1, #entries, 2 do
  local run_id, entry = entries[i], entries[i + 1]
  if redis.call("hget", waiters_key, run_id) == entry then
    dropped = dropped + redis.call("hdel", waiters_key, run_id)
  end
end
return dropped
