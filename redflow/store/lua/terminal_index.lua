-- Helper: the failed / canceled indexes of one run (redflow-gevent extension):
-- per workflow and per tag, so that "failed runs of W for customer 42" is read
-- from an index and not by scanning. Scripts that end a run or retry it take
-- their keys as trailing KEYS in pairs (failed key, canceled key) from ``first``
-- on (keys.Keys.terminal_index_keys). A run that ends any other way costs nothing.

local function index_terminal(first, final, run_id, at)
  local offset = (final == "failed" and 0) or (final == "canceled" and 1) or nil
  if not offset then
    return
  end
  for i = first + offset, #KEYS, 2 do
    redis.call("zadd", KEYS[i], at, run_id)
  end
end

local function unindex_terminal(first, run_id)
  for i = first, #KEYS do
    redis.call("zrem", KEYS[i], run_id)
  end
end
