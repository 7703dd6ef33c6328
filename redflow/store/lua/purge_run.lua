-- purge_run (needs status.lua, one_per_key.lua): delete one finished run whole, in one call,
-- so that any reader (this package, the TypeScript client, the asyncio one)
-- sees the run complete or absent. The run must still be terminal, and be
-- the one the caller saw (same status, finishedAt and workflow): a run
-- retried (and maybe finished again) since it was read is left alone. A run whose hash
-- is gone already has its leftover keys and index entries removed. Only
-- keys deleted (DEL, ZREM): it works on a Redis that is out of memory.
-- The asyncio package's workers write output stream passes 2.. of a run too
-- (streamMaxPass): those are the run key + ":stream:pass:<n>" (keys.Keys.run_stream).
-- KEYS: the run hash, then the run's other own keys (steps, lease, done,
--       children, stream ...), then every index that may name the run (zsets:
--       runs:created, the terminal status zsets, workflow-runs ...)
-- ARGV: run id, how many KEYS are the run's own keys (the hash included),
--       finishedAt the caller saw ("" for any), workflow it saw ("" for any),
--       status it saw ("" for any: then KEYS hold every terminal status index)
-- Returns "purged" | "missing" (no run hash: leftovers removed)
--       | "live" (not terminal, or a hash without a status: untouched)
--       | "changed" (another status, finishedAt or workflow: untouched).
local run_id, own_count, seen_finished_at, seen_workflow, seen_status = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local run_key = KEYS[1]
local own_keys = {unpack(KEYS, 1, own_count)}
local index_keys = {unpack(KEYS, own_count + 1)}

local run = redis.call("hmget", run_key, "status", "finishedAt", "workflow", "streamMaxPass", "singletonKey", "debounceKey")
local status, finished_at, workflow = run[1], run[2], run[3]
local outcome = "missing"
if status then
  if not TERMINAL[status] then
    return "live"
  end
  local function differs(seen, now)
    return seen ~= "" and seen ~= now
  end
  if differs(seen_finished_at, finished_at) or differs(seen_workflow, workflow) or differs(seen_status, status) then
    return "changed"
  end
  outcome = "purged"
elseif redis.call("exists", run_key) == 1 then
  return "live"
end
for pass = 2, math.min(tonumber(run[4]) or 1, 1000) do
  own_keys[#own_keys + 1] = run_key .. ":stream:pass:" .. pass
end
redis.call("del", unpack(own_keys))
let_go(run[5], run_id)  -- a key or window a run ended by another client's worker may still name
let_go(run[6], run_id)
for _, index_key in ipairs(index_keys) do
  redis.call("zrem", index_key, run_id)
end
return outcome
