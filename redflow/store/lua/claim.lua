-- Helper (needs status.lua, limits.lua, priority.lua, start.lua): claim and
-- start the next run of a queue. A run that a limit holds back is put aside
-- (limits.lua) and the claim goes on to the next one, a few at most per call,
-- so that held runs never keep a slot from the runs behind them.
local CLAIMS_PER_CALL = 8

-- Returns the run id and its start reply, or nil when nothing was started.
local function claim_and_start(ready_key, processing_key, prioritized_key, run_prefix, index, token, lease_ms, now, limited)
  for _ = 1, CLAIMS_PER_CALL do
    local run_id = claim_ready(ready_key, processing_key, prioritized_key)
    if not run_id then
      return nil
    end
    local reply = start_claimed(run_prefix, processing_key, index, run_id, token, lease_ms, now, limited, "")
    if reply[1] ~= "held" then
      return run_id, reply
    end
  end
  return nil
end
