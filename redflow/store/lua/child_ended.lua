-- child_ended (needs status.lua, waits.lua): a child of
-- ``step.run_workflows`` ended; note it in its parent's children-ended set,
-- once. A parent parked waiting for its children counts it off, and the
-- last one sends the parent to ready. A parent that is gone (purged) gets
-- nothing: the set is written only beside an existing run hash, so that a
-- purge, which deletes both in one call, leaves none behind.
-- KEYS: parent run, the six status zsets (the parent's queue), children-ended,
--       parent's queue scheduled, parent's queue ready
-- ARGV: child run id, parent run id, now ms
-- Returns "resumed" | "waiting" (children still running) | "noted" (the
-- parent is not parked for children) | "seen" (this end was reported before)
-- | "gone" (no parent run).
local run_key = KEYS[1]
local index = status_keys(2)
local ended_key, queue_scheduled_key, ready_key = KEYS[8], KEYS[9], KEYS[10]
local child_id, parent_id, now = ARGV[1], ARGV[2], ARGV[3]

local run = redis.call("hmget", run_key, "status", "parkedFor")
if not run[1] then
  return "gone"
end
if redis.call("sadd", ended_key, child_id) == 0 then
  return "seen"
end
if run[1] ~= "scheduled" or run[2] ~= "children" then
  return "noted"
end
if redis.call("hincrby", run_key, "awaitingChildren", -1) > 0 then
  return "waiting"
end
wake_parked(run_key, index, parent_id, queue_scheduled_key, ready_key, now)
return "resumed"
