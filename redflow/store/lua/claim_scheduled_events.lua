-- claim_scheduled_events (needs clock.lua): take the due events of
-- ``schedule_event`` for one worker to deliver, so that each is delivered
-- once however many workers look. A claimed event stays in the zset as
-- "claimed:<fire ms>:<event>" scored with its claim's end: the claimer
-- removes it once delivered (ZREM); if the claimer dies first, the claim
-- ends and the next claim takes it again (its fire time kept, which is what
-- deliveries compare the waits' start with). Due and ends are by Redis's
-- clock.
-- KEYS: scheduled events
-- ARGV: most events to take, claim ms
-- Returns {now ms, score of the first entry left (or ""), then per event
-- taken: its claimed member, its fire ms, the event's own member}; times
-- as strings (ms with a fraction).
local key, most, claim_ms = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])

local now = server_now_ms()
local claim_end = string.format("%.3f", tonumber(now) + claim_ms)
local due = redis.call("zrangebyscore", key, "-inf", now, "WITHSCORES", "LIMIT", 0, most)
local reply = {now, ""}
for i = 1, #due, 2 do
  local member = due[i]
  local fire_at, event = string.match(member, "^claimed:([^:]+):(.*)$")
  if not fire_at then
    fire_at, event = due[i + 1], member
    redis.call("zrem", key, member)
    member = "claimed:" .. fire_at .. ":" .. member
  end
  redis.call("zadd", key, claim_end, member)
  table.insert(reply, member)
  table.insert(reply, fire_at)
  table.insert(reply, event)
end
local head = redis.call("zrange", key, 0, 0, "WITHSCORES")
reply[2] = head[2] or ""
return reply
