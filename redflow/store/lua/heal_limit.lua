-- heal_limit (needs status.lua, limits.lua): the sweeper's check of one
-- concurrency limit that has held runs. Its units are counted again from what
-- is true (the counter from the running index; a units set loses the runs
-- that are no longer running, e.g. ended by a worker that knows nothing of
-- limits), and as many held runs as units are free go back to ready, so that
-- a unit lost on the way never leaves runs held for good. A limit whose held
-- list is empty (or whose record is unreadable) leaves the index.
-- KEYS: held index, running index
-- ARGV: held list key, run key prefix
-- Returns the number of held runs moved back to ready.
local index_key, running_key = KEYS[1], KEYS[2]
local held_key, run_prefix = ARGV[1], ARGV[2]
local scope = scope_of(run_prefix)

local ok, entry = pcall(cjson.decode, redis.call("hget", index_key, held_key) or "")
if not ok or type(entry) ~= "table" or not is_key(held_key, scope) or not (entry.u == "" or is_key(entry.u, scope))
    or not is_key(entry.w, scope) or not is_count(entry.l) or type(entry.n) ~= "string" then
  redis.call("hdel", index_key, held_key)
  return 0
end
if redis.call("llen", held_key) == 0 then
  redis.call("hdel", index_key, held_key)
  return 0
end
local used = 0
if entry.u == "" then
  used = count_running(entry.w, running_key, run_prefix, entry.n)
else
  for _, run_id in ipairs(redis.call("smembers", entry.u)) do
    if redis.call("hget", run_prefix .. run_id, "status") == "running" then
      used = used + 1
    else
      redis.call("srem", entry.u, run_id)
    end
  end
end
if used >= entry.l then
  return 0
end
return wake_held(held_key, run_prefix, entry.l - used)
