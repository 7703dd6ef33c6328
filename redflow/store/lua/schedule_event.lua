-- schedule_event (needs clock.lua): store an event of ``schedule_event`` to
-- fire at ``at``, or now if that is past (an event fires no earlier than it
-- was scheduled: the waits begun before then get it). Its fire time is what
-- a delivery compares the waits' start with (claim_scheduled_events.lua).
-- KEYS: scheduled events
-- ARGV: the event's member (JSON {id, event, payloadJson}), at ms
-- Returns the fire time (ms, as a string).
local key, member, at = KEYS[1], ARGV[1], ARGV[2]

local now = server_now_ms()
local fire_at = tonumber(at) > tonumber(now) and at or now
redis.call("zadd", key, fire_at, member)
return fire_at
