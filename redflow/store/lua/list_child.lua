-- list_child: list a run about to be created as a child in its parent's
-- children index (``Keys.run_children``), only while the parent run exists,
-- so that a child started for a parent that is gone (purged, or never
-- there) re-creates no index nothing would delete.
-- KEYS: parent run, the parent's children index
-- ARGV: child run id, createdAt ms
-- Returns 1 if listed, 0 if there is no parent run.
local run_key, children_key = KEYS[1], KEYS[2]
local child_id, created_at = ARGV[1], ARGV[2]

if redis.call("exists", run_key) == 0 then
  return 0
end
redis.call("zadd", children_key, created_at, child_id)
return 1
