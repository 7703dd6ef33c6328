-- watch_run: read what a waiter needs of a run and, while it is not
-- finished, flag it as waited for (the ``waiters`` field), so that the
-- script that finishes it pushes the wake-up token the waiter blocks on
-- (a run nobody waits for costs its finisher nothing).
-- KEYS: run
-- ARGV: none
-- Returns {status, outputJson, errorJson, cancelReason, queue} (status nil: no such run).
local run_key = KEYS[1]
local run = redis.call("hmget", run_key, "status", "outputJson", "errorJson", "cancelReason", "queue")
local status = run[1]
if status and status ~= "succeeded" and status ~= "failed" and status ~= "canceled" then
  redis.call("hset", run_key, "waiters", "1")
end
return run
