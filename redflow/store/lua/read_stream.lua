-- read_stream (needs status.lua): a page of a run's output stream, with the run's status and
-- where its signal stream ends, read together: a reader that sees the run unfinished blocks
-- (XREAD) on the item stream and on the signal stream after that point, and wakes on the
-- first item or the end entry (finalize.lua's announce_end). With ``watch``, an unfinished
-- run gets streamEnabled (the asyncio package's field) if it has not: then its end is
-- announced even if it never streams (a run nobody reads and that never streams pays nothing).
-- KEYS: run, stream, signal stream
-- ARGV: after id (exclusive), count, "1" to watch
-- Returns {status ("" for no run), signal position, then id, record, id, record ... in order}.
local run_key, stream_key, signal_key = KEYS[1], KEYS[2], KEYS[3]
local after, count, watch = ARGV[1], ARGV[2], ARGV[3] == "1"

local run = redis.call("hmget", run_key, "status", "streamEnabled")
local status = run[1]
if not status then
  return {""}
end
if watch and not run[2] and not TERMINAL[status] then
  redis.call("hset", run_key, "streamEnabled", "1")
end
local last = redis.call("xrevrange", signal_key, "+", "-", "COUNT", 1)
local reply = {status, last[1] and last[1][1] or "0-0"}
local entries = redis.call("xrange", stream_key, "(" .. after, "+", "COUNT", count)
for i = 1, #entries do
  local entry = entries[i]
  local record = ""
  for j = 1, #entry[2], 2 do
    if entry[2][j] == "record" then
      record = entry[2][j + 1]
    end
  end
  reply[#reply + 1] = entry[1]
  reply[#reply + 1] = record
end
return reply
