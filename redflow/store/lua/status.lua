-- Helper: the six runs:status:* index zsets and moving a run between them.
-- Scripts that change a run's status get the six zsets as consecutive KEYS,
-- in keys.RUN_STATUSES order, and name the first one's position; the scripts
-- of the hot path take the scope instead (keys.Keys.scope), one argument
-- for six keys: status_index names a zset the first time it is asked for.
local TERMINAL = {succeeded = true, failed = true, canceled = true}
local STATUS_ORDER = {"scheduled", "queued", "running", "succeeded", "failed", "canceled"}
local KNOWN_STATUS = {}  -- (a plain loop: the library's top level runs where ipairs is not defined)
for i = 1, #STATUS_ORDER do
  KNOWN_STATUS[STATUS_ORDER[i]] = true
end

local STATUS_INDEX = {__index = function(index, status)
  if not KNOWN_STATUS[status] then
    return nil
  end
  local key = index[0] .. "runs:status:" .. status
  index[status] = key
  return key
end}

-- status -> index key of one scope. A name is a pure function of the scope,
-- so each scope's table is kept across calls of the library (all of them are
-- dropped past INDEXES_KEPT scopes): making it on every call was about 4 % of
-- Redis's instructions per run (counted with callgrind).
local INDEXES_KEPT = 1000
local status_indexes, status_index_count = {}, 0
local function status_index(scope)
  local index = status_indexes[scope]
  if not index then
    if status_index_count >= INDEXES_KEPT then
      status_indexes, status_index_count = {}, 0
    end
    index = setmetatable({[0] = scope}, STATUS_INDEX)
    status_indexes[scope] = index
    status_index_count = status_index_count + 1
  end
  return index
end

-- status -> index key, from the six KEYS starting at ``first``.
local function status_keys(first)
  local keys = {}
  for i, status in ipairs(STATUS_ORDER) do
    keys[status] = KEYS[first + i - 1]
  end
  return keys
end

-- Set the run's status (with ``fields``, more field/value pairs, in one
-- HSET) and move it from the ``prev`` index to the ``next_status`` one.
local function move_status(run_key, index, run_id, prev, next_status, at, fields)
  if prev and index[prev] then
    redis.call("zrem", index[prev], run_id)
  end
  if fields then
    redis.call("hset", run_key, "status", next_status, unpack(fields))
  else
    redis.call("hset", run_key, "status", next_status)
  end
  redis.call("zadd", index[next_status], at, run_id)
end
