-- renew_lease: extend a lock if it holds this token (the seed's script).
-- KEYS: lock
-- ARGV: token, ms
-- Returns "OK" if renewed, else nil.
local lock_key, token, ms = KEYS[1], ARGV[1], ARGV[2]
if redis.call("get", lock_key) == token then
  return redis.call("set", lock_key, token, "PX", ms)
end
return nil
