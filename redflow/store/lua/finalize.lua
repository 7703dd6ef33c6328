-- Helper (needs status.lua): turn a run terminal.
-- A cancel request wins over succeeded/failed, as in the seed's finalizeRun.
-- Pushes the wake-up token for waiters (blocked on done_key).
local function finalize(run_key, index, done_key, run_id, prev, requested, cancel_at, at, output_json, error_json, wake_ttl)
  local final = requested
  if requested ~= "canceled" and cancel_at and cancel_at ~= "" then
    final = "canceled"
  end
  if final == "succeeded" then
    move_status(run_key, index, run_id, prev, final, at, {"outputJson", output_json, "finishedAt", at})
    redis.call("hdel", run_key, "availableAt", "errorJson")
  elseif error_json ~= "" then
    move_status(run_key, index, run_id, prev, final, at, {"errorJson", error_json, "finishedAt", at})
    redis.call("hdel", run_key, "availableAt", "outputJson")
  else
    move_status(run_key, index, run_id, prev, final, at, {"finishedAt", at})
    redis.call("hdel", run_key, "availableAt", "outputJson")
  end
  redis.call("rpush", done_key, "1")
  redis.call("pexpire", done_key, wake_ttl)
  return final
end
