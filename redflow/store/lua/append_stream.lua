-- append_stream: one ctx.stream item, fenced like a settle: only while
-- the run is running and its hash names this attempt's lease token (every start writes
-- it, so an attempt another one took over, or a run that ended, writes nothing).
-- The stream is the asyncio package's pass 1 (keys.Keys.run_stream), trimmed to about
-- ``max items``; the first item sets that package's fields (streamEnabled, ...).
-- Items are numbered within an attempt by position (the handler's n-th ctx.stream call).
-- A run that parks keeps the position it had reached (streamParkedAt, written by
-- settle_run.lua's park), and the handler that resumes it writes only the positions
-- after it: what it streamed before the park is not streamed twice.
-- KEYS: run, stream
-- ARGV: lease token, attempt, position, record JSON, now ms, max items
-- Returns {"written", item id, replayed} | {"replayed", "", replayed} | {"refused", status}:
-- ``replayed``, the last position the attempt had written when the run last parked (0: none).
local run_key, stream_key = KEYS[1], KEYS[2]
local token, attempt, position, record, now, max_items = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]

local run = redis.call("hmget", run_key, "status", "leaseToken", "streamPosition", "streamParkedAt", "streamMaxPass")
if run[1] ~= "running" or run[2] ~= token then
  return {"refused", run[1] or ""}
end
-- "<attempt>:<position>" -> position, when it is of this attempt (else 0)
local function position_of(mark)
  if not mark then
    return 0
  end
  local of, at = string.match(mark, "^(%d+):(%d+)$")
  return of == attempt and tonumber(at) or 0
end
local replayed = position_of(run[4])
if position <= replayed then
  return {"replayed", "", replayed}
end
local id = redis.call("xadd", stream_key, "MAXLEN", "~", max_items, "*", "record", record)
local fields = {}
if position > position_of(run[3]) then  -- (items streamed from several greenlets may arrive out of order)
  fields = {"streamPosition", attempt .. ":" .. position}
end
if not run[5] then
  local n = #fields
  fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = "streamEnabled", "1", "streamActivePass", "1"
  fields[n + 5], fields[n + 6], fields[n + 7], fields[n + 8] = "streamMaxPass", "1", "streamStartedAt", now
end
if #fields > 0 then
  redis.call("hset", run_key, unpack(fields))
end
return {"written", id, replayed}
