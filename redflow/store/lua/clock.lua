-- Helper: Redis's own clock, for the scripts that record or compare times
-- of events and waits (a worker's estimate, taken before its call was sent,
-- may be behind by the time the call runs, and whole milliseconds cannot
-- order a wait and an event a few hundred microseconds apart).
-- Epoch ms with microseconds as its fraction, as a string ("...123.456"):
-- Lua's own number formatting would keep only 14 digits.
local function server_now_ms()
  local t = redis.call("time")
  local micros = tonumber(t[2])
  return t[1] .. string.format("%03d.%03d", math.floor(micros / 1000), micros % 1000)
end
