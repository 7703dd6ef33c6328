-- unlock: delete a lock (a run's lease, the cron leader lock) if it holds
-- this token (the seed's script).
-- KEYS: lock
-- ARGV: token
-- Returns 1 if deleted, else 0.
local lock_key, token = KEYS[1], ARGV[1]
if redis.call("get", lock_key) == token then
  return redis.call("del", lock_key)
end
return 0
