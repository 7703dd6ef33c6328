-- purge_invalid_entries: a processing entry that cannot be a run id (not
-- [A-Za-z0-9_:.-], e.g. binary bytes) is removed by its raw bytes, which a
-- decoded reply cannot name.
-- KEYS: queue processing
-- ARGV: none
-- Returns the removed entries.
local processing_key = KEYS[1]
local removed = {}
for _, entry in ipairs(redis.call("lrange", processing_key, 0, -1)) do
  if not string.match(entry, "^[%w_:%.%-]+$") then
    redis.call("lrem", processing_key, 0, entry)
    table.insert(removed, entry)
  end
end
return removed
