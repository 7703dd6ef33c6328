-- settle_run (needs status.lua, finalize.lua, terminal_index.lua, waits.lua, limits.lua, priority.lua,
-- start.lua, claim.lua, one_per_key.lua, step_records.lua): end one attempt,
-- and (with a next token) claim and start the next run of the same queue in
-- the same call, so that a busy slot costs one round trip per run.
-- Ending: finalize (succeeded / failed / canceled), schedule a retry or park
-- the run in a durable wait (waits.lua), and leave processing. The fence: the run hash names the lease token of the
-- attempt that started it last (every start writes it), so a run another
-- attempt took over is refused ("stale"); with check-lease (the attempt's
-- lease may have lapsed), a lease held by anyone else refuses it too. A
-- finalized run is never finalized again: a repeated call changes nothing.
-- The lease of a finished run is left to expire (one command saved per run;
-- nothing claims a finished run); a retry's lease is released at once.
-- A run whose output stream is written or read gets its end announced there
-- (announce_end in finalize.lua); one that parks keeps how far it streamed.
-- A finished run with a ``parentRunId`` field also gets its terminal stream
-- entry, for the asyncio package's waiters (finalize.lua's tell_terminal).
-- A run with limits gives its units back as it leaves running (limits.lua),
-- and the next run is claimed past runs a limit holds back (claim.lua). A run that ends
-- lets go of its singleton key (one_per_key.lua).
-- KEYS: run, then the run's failed / canceled index pairs (terminal_index.lua; written only when it ends so)
-- ARGV: run id, status (succeeded|failed|canceled|scheduled|parked), now ms,
--       outputJson, errorJson, lease token, wake ttl ms, retry at ms,
--       "1" to check the lease, "1" to clean fields of an earlier attempt,
--       next lease token ("" claims nothing), lease ms, scope (keys.Keys.scope:
--       the status zsets and run keys are built from it), queue prefix
--       (keys.Keys.queue_prefix: the queue's lists and zsets are built from it),
--       limited workflows ("\n"-separated, see limits.lua),
--       the blob field and value an output or error that is a @blob: reference names ("" "" for none),
--       the number of step records sent behind with the settle (engine/step_records.py), then
--       theirs (name, JSON, blob field, blob each; written once the fence holds, before the end),
--       then, to park, the wait (see park_run in waits.lua)
-- The lease and the wake-up list are the run key + ":lease" / ":done" (keys.Keys.run_lease, run_done),
-- named only where used: a run that ends without a lease check, a retry or a waiter never needs them.
-- Returns {status the run ended in | "parked" | "woken" | "stale" | "missing"} and, when a next
-- run was asked for, its id ("" if the queue is empty) and start reply.
local run_key = KEYS[1]
local run_id, requested, now, output_json, error_json = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local token, wake_ttl, retry_at, check_lease, cleanup = ARGV[6], ARGV[7], ARGV[8], ARGV[9] == "1", ARGV[10] == "1"
local next_token, lease_ms, scope, queue_prefix, limited = ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15]
local blob_field, blob, records = ARGV[16], ARGV[17], tonumber(ARGV[18])
local index = status_index(scope)
local run_prefix = scope .. "run:"
local processing_key = queue_prefix .. "processing"

-- End the attempt. One pass of a loop whose breaks are early returns: a
-- nested function would be a new closure, with its upvalues, on every call
-- (about 3 % of Redis's instructions per run, counted with callgrind).
local final
repeat
  local run = redis.call("hmget", run_key, "status", "cancelRequestedAt", "leaseToken", "waiters", "limitsJson",
    "streamEnabled", "streamActivePass", "streamPosition", "parentRunId", "singletonKey")
  local prev, cancel_at, fence, waiters = run[1], run[2], run[3], run[4]
  if not prev then
    redis.call("lrem", processing_key, -1, run_id)
    final = "missing"
    break
  end
  if TERMINAL[prev] then
    redis.call("lrem", processing_key, -1, run_id)
    final = prev
    break
  end
  if fence ~= token then
    final = "stale"
    break
  end
  if check_lease then
    local holder = redis.call("get", run_key .. ":lease")
    if holder and holder ~= token then
      final = "stale"
      break
    end
  end
  if records > 0 then  -- steps this attempt ran since its last call (the steps hash is the run key + ":steps")
    save_records(run_key, run_key .. ":steps", ARGV, 19, records)
  end
  redis.call("lrem", processing_key, -1, run_id)
  if prev == "running" and run[5] then
    release_units(run[5], run_id, run_prefix)
  end
  if blob_field ~= "" then  -- the blob the output's or error's @blob: reference names (core/blobs.py)
    redis.call("hset", run_key .. ":blobs", blob_field, blob)
  end
  final = final_status(requested, cancel_at)
  if final == "parked" then  -- a durable wait (waits.lua); its arguments follow this script's own
    if run[8] then  -- what it streamed so far is not streamed again when it resumes (append_stream.lua)
      redis.call("hset", run_key, "streamParkedAt", run[8])
    end
    final = park_run(run_key, index, run_id, prev, run_key .. ":lease", queue_prefix .. "scheduled", queue_prefix .. "ready", now, ARGV, 19 + records * 4)
    break
  end
  if final == "scheduled" then
    move_status(run_key, index, run_id, prev, "scheduled", now, {"availableAt", retry_at, "errorJson", error_json, "leaseToken", ""})
    redis.call("zadd", queue_prefix .. "scheduled", retry_at, run_id)
    redis.call("del", run_key .. ":lease")
    final = "scheduled"
    break
  end
  finalize(run_key, index, run_id, prev, final, now, output_json, error_json, {"leaseToken", ""}, cleanup)
  index_terminal(2, final, run_id, now)
  announce_end(run_key, run[6], run[7], final, now)
  tell_terminal(run_key, run[9], final, now, wake_ttl)
  wake_waiters(waiters and run_key .. ":done", waiters, wake_ttl)  -- the key's name is made only for a waited-on run
  let_go(run[10], run_id)
until true

if next_token == "" then
  return {final}
end
local next_id, reply = claim_and_start(queue_prefix .. "ready", processing_key, queue_prefix .. "prioritized", run_prefix, index, next_token, lease_ms, now, limited)
if not next_id then
  return {final, ""}
end
return {final, next_id, reply}
