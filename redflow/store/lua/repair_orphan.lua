-- repair_orphan: the sweeper's fix for a running run that recovery cannot
-- find (no lease, and in neither its queue's processing nor its ready list;
-- older versions' "busy" path could leave one so): it goes to the claim end
-- of ready, as the reaper moves a run whose lease is gone. Everything is
-- re-checked here, atomically.
-- KEYS: run, lease, queue processing, queue ready
-- ARGV: run id
-- Returns 1 if the run was requeued, else 0.
local run_key, lease_key, processing_key, ready_key, run_id = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
if redis.call("hget", run_key, "status") ~= "running" or redis.call("exists", lease_key) == 1 then
  return 0
end
if redis.call("lpos", processing_key, run_id) or redis.call("lpos", ready_key, run_id, "RANK", -1) then
  return 0
end
redis.call("rpush", ready_key, run_id)
return 1
