-- confirm_run (needs owns.lua): whether an attempt still owns its run, asked
-- before a new step by an attempt whose lease may have lapsed (a frozen or
-- starved worker), and after a step started child runs (engine/fence.py).
-- Owning is what a step record needs (see owns): the lease is this
-- attempt's, or it lapsed while nobody took the run over (the run is still
-- running under this attempt's token), and then it is taken again. An owner
-- keeps the lease for another lease ms. Also returns the run's status and
-- cancelRequestedAt, so that a canceled run stops here, owned or not.
-- KEYS: lease, run
-- ARGV: lease token, lease ms
-- Returns {"owned" | "stale", status ("" for a missing run), cancelRequestedAt}.
local lease_key, run_key = KEYS[1], KEYS[2]
local token, lease_ms = ARGV[1], ARGV[2]

local run = redis.call("hmget", run_key, "status", "cancelRequestedAt", "leaseToken")
local status, cancel_at = run[1] or "", run[2] or ""
if not owns(lease_key, token, run[1], run[3], lease_ms, true) then
  return {"stale", status, cancel_at}
end
redis.call("pexpire", lease_key, lease_ms)
return {"owned", status, cancel_at}
