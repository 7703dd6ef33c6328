-- Helper: a singleton key (it names the unfinished run that holds it) and a debounce
-- window (it names the still scheduled run later calls collapse into),
-- core/singleton.py. Each script that ends, promotes, cancels or purges a run
-- lets go of the one the run names in its singletonKey / debounceKey field (read by
-- the caller with the fields it reads anyway: a run with neither costs nothing),
-- if it still names this run: a key taken over since (a "replace") is left alone.
local function let_go(key, run_id)
  if key and key ~= "" and redis.call("get", key) == run_id then
    redis.call("del", key)
  end
end
