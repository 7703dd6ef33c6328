-- Helper: whether an attempt still owns its run.
-- It holds the lease, or (when it ``may_retake``) nobody does and the run is
-- still running and still in processing (the lease lapsed but no reaper or
-- worker took the run over), in which case the lease is taken again. The
-- reaper's check is atomic too, so exactly one side wins. Progress (a step's
-- result, the run's end) may retake a lapsed lease; the keeper's bookkeeping
-- (renewals, markers) may not, so that a lapsed lease stops an attempt that
-- is only waiting.
local function owns(lease_key, token, status, processing_key, run_id, lease_ms, may_retake)
  local holder = redis.call("get", lease_key)
  if holder == token then
    return true
  end
  if holder or not may_retake or status ~= "running" or not redis.call("lpos", processing_key, run_id) then
    return false
  end
  redis.call("set", lease_key, token, "PX", lease_ms)
  return true
end
