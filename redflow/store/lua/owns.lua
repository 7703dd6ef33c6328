-- Helper: whether an attempt still owns its run.
-- It holds the lease; or (when it ``may_retake``) nobody does, the run is
-- still running and its hash still names this attempt's token as the last
-- one that started it (``fence``: every start writes it, so no other attempt
-- took the run over), in which case the lease is taken again. Progress (a
-- step's result) may retake a lapsed lease; the keeper's bookkeeping
-- (renewals, markers) may not, so that a lapsed lease stops an attempt that
-- is only waiting.
local function owns(lease_key, token, status, fence, lease_ms, may_retake)
  local holder = redis.call("get", lease_key)
  if holder == token then
    return true
  end
  if holder or not may_retake or status ~= "running" or fence ~= token then
    return false
  end
  redis.call("set", lease_key, token, "PX", lease_ms)
  return true
end
