-- reap_run: a processing entry whose lease is gone goes back to ready (at
-- the claim end, so a recovered run is next). Atomic, unlike the seed's
-- GET + LREM.
-- KEYS: queue processing, queue ready, lease
-- ARGV: run id
-- Returns 1 if the run was moved, else 0.
local processing_key, ready_key, lease_key, run_id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if redis.call("exists", lease_key) == 1 then
  return 0
end
if redis.call("lrem", processing_key, 1, run_id) > 0 then
  redis.call("rpush", ready_key, run_id)
  return 1
end
return 0
