-- claim_scheduled_events (needs clock.lua): take the due events of
-- ``schedule_event`` for one worker to deliver, in the order they fire, so
-- that each is delivered once however many workers look, and none of a name
-- before an earlier one of that name. A claimed event stays in the zset at
-- its fire time as "claimed:<fire ms>:<claim end ms>:<event>": the claimer
-- removes it once delivered (ZREM). While the claim lasts, no later event of
-- its name is taken (a wait takes the first matching event that fires after
-- it began: a later one delivered first would take its place); once it has
-- ended (the claimer died or froze), the next claim, by any worker, takes it
-- again with its fire time kept, which is what deliveries compare the waits'
-- start with. A "claimed:<fire ms>:<event>" entry (claimed by a worker before
-- this form, scored with its claim's end) is taken again once due. Due and
-- ends are by Redis's clock.
-- KEYS: scheduled events
-- ARGV: most events to take, claim ms
-- Returns {now ms, when to look again (the first fire time or claim end
-- ahead, or ""), then per event taken: its claimed member, its fire ms, the
-- event's own member}; times as strings (ms with a fraction).
local key, most, claim_ms = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])

local now = server_now_ms()
local claim_end = string.format("%.3f", tonumber(now) + claim_ms)
local due = redis.call("zrangebyscore", key, "-inf", now, "WITHSCORES", "LIMIT", 0, most)
local reply = {now, ""}
local held, next_look = {}, nil -- names with an earlier event still claimed; the first of those claims' ends

local function name_of(event)
  local ok, decoded = pcall(cjson.decode, event)
  return ok and type(decoded) == "table" and decoded.event or nil
end

for i = 1, #due, 2 do
  local member = due[i]
  local fire_at, ends, event = string.match(member, "^claimed:([^:]+):([^:{]+):(.*)$")
  if not fire_at then
    fire_at, event = string.match(member, "^claimed:([^:]+):(.*)$")
    if not fire_at then
      fire_at, event = due[i + 1], member
    end
  end
  local name = name_of(event)
  if ends and tonumber(ends) > tonumber(now) then -- being delivered: the later events of its name wait
    if name then
      held[name] = true
    end
    if not next_look or tonumber(ends) < tonumber(next_look) then
      next_look = ends
    end
  elseif not (name and held[name]) then
    redis.call("zrem", key, member)
    member = "claimed:" .. fire_at .. ":" .. claim_end .. ":" .. event
    redis.call("zadd", key, fire_at, member)
    table.insert(reply, member)
    table.insert(reply, fire_at)
    table.insert(reply, event)
  end
end
local ahead = redis.call("zrangebyscore", key, "(" .. now, "+inf", "WITHSCORES", "LIMIT", 0, 1)
if ahead[2] and (not next_look or tonumber(ahead[2]) < tonumber(next_look)) then
  next_look = ahead[2]
end
reply[2] = next_look or ""
return reply
