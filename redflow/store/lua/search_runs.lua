-- search_runs: walk one run index newest first and keep the runs that are
-- also in every other index given (the filters of list_runs), in bounded
-- work: it stops after ``wanted`` matches or after ``skip_budget`` entries
-- that did not match, so one call never holds Redis for long.
-- It resumes after a cursor (score, id): from the id's rank when the id is
-- still in the index with that score, else from the score itself (entries of
-- that same score come in descending id order: those after the id, compared
-- bytewise, are kept), so runs that left or joined the index meanwhile are fine.
-- KEYS: the index walked, then the indexes a match must also be in (smallest first)
-- ARGV: cursor score ("" = from the newest), cursor id, matches wanted,
--       non-matching entries it may examine, entries read per step (<= 1000)
-- Returns {{id, score, ...} of the matches, last id examined, its score,
--          1 if the walk reached the end of the index else 0, entries examined}.
local walk_key = KEYS[1]
local probe_keys = {unpack(KEYS, 2)}
local after_score, after_id, wanted = ARGV[1], ARGV[2], tonumber(ARGV[3])
local skip_budget, batch = tonumber(ARGV[4]), tonumber(ARGV[5])

-- a > b, byte by byte (Lua's own comparison of strings follows the locale)
local function bytes_greater(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end

local function start_rank()
  if after_score == "" then
    return 0
  end
  local bound = tonumber(after_score)
  if after_id ~= "" then
    local score = redis.call("zscore", walk_key, after_id)
    if score and tonumber(score) == bound then
      return redis.call("zrevrank", walk_key, after_id) + 1
    end
  end
  local rank = redis.call("zcount", walk_key, "(" .. after_score, "+inf")
  while true do
    local entry = redis.call("zrange", walk_key, rank, rank, "REV", "WITHSCORES")
    if #entry == 0 or tonumber(entry[2]) ~= bound or not bytes_greater(entry[1], after_id) then
      return rank
    end
    rank = rank + 1
  end
end

local card = redis.call("zcard", walk_key)
local rank = start_rank()
local matches, found, examined = {}, 0, 0
local last_id, last_score = after_id, after_score
while rank < card do
  local page = redis.call("zrange", walk_key, rank, rank + batch - 1, "REV", "WITHSCORES")
  local n = #page / 2
  if n == 0 then
    break
  end
  local ids = {}
  for i = 1, n do
    ids[i] = page[2 * i - 1]
  end
  -- the probes come smallest first: each later one is asked about the survivors only
  local alive, at = ids, {}
  for i = 1, n do
    at[i] = i
  end
  for _, key in ipairs(probe_keys) do
    if #alive == 0 then
      break
    end
    local scores = redis.call("zmscore", key, unpack(alive))
    local kept, kept_at = {}, {}
    for j = 1, #alive do
      if scores[j] then
        kept[#kept + 1], kept_at[#kept_at + 1] = alive[j], at[j]
      end
    end
    alive, at = kept, kept_at
  end
  local match = {}
  for _, i in ipairs(at) do
    match[i] = true
  end
  for i = 1, n do
    examined = examined + 1
    last_id, last_score = ids[i], page[2 * i]
    if match[i] then
      matches[#matches + 1] = last_id
      matches[#matches + 1] = last_score
      found = found + 1
    end
    if found >= wanted or examined - found >= skip_budget then
      return {matches, last_id, last_score, (rank + i >= card) and 1 or 0, examined}
    end
  end
  rank = rank + n
end
return {matches, last_id, last_score, 1, examined}
