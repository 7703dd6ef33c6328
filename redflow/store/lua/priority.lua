-- Helper: priorities (BullMQ's marker technique). A run enqueued with a
-- priority > 0 waits in its queue's prioritized zset, scored
-- (10 - priority) * 2^40 + enqueue sequence (best first, equal priorities in
-- order), and one marker entry sits at the claim end of the ready list while
-- that zset has runs. A claim that takes the marker takes the zset's best run
-- instead and puts the marker back while runs remain. Runs of priority 0, and
-- clients that know nothing of priorities, use the ready list as before.
-- The marker must equal redflow.core.flow.PRIORITY_MARKER.
local PRIORITY_MARKER = "__redflow:prioritized__"
local PRIORITY_SPAN = 1099511627776  -- 2^40 enqueues per priority level

-- Make a queued run claimable: LPUSH to ready, or into the prioritized zset.
local function push_ready(ready_key, prioritized_key, seq_key, run_id, priority)
  local level = tonumber(priority) or 0
  if level < 1 then
    redis.call("lpush", ready_key, run_id)
    return
  end
  level = math.min(math.floor(level), 9)
  local seq = redis.call("incr", seq_key)
  redis.call("zadd", prioritized_key, (10 - level) * PRIORITY_SPAN + seq, run_id)
  if redis.call("zcard", prioritized_key) == 1 then
    redis.call("rpush", ready_key, PRIORITY_MARKER)
  end
end

-- A claim moved the marker to the head of processing: put the best
-- prioritized run there instead (nil when none is left: the marker is dropped).
local function take_prioritized(ready_key, processing_key, prioritized_key)
  local best = redis.call("zpopmin", prioritized_key)
  if #best == 0 then
    redis.call("lpop", processing_key)
    return nil
  end
  redis.call("lset", processing_key, 0, best[1])
  if redis.call("zcard", prioritized_key) > 0 then
    redis.call("rpush", ready_key, PRIORITY_MARKER)
  end
  return best[1]
end

-- Move the next run of a queue from ready to processing (LMOVE, or the best
-- prioritized run when the marker comes up); false when there is none.
local function claim_ready(ready_key, processing_key, prioritized_key)
  for _ = 1, 3 do  -- a leftover marker (its runs were canceled) is dropped and the claim goes on
    local run_id = redis.call("lmove", ready_key, processing_key, "RIGHT", "LEFT")
    if run_id ~= PRIORITY_MARKER then
      return run_id
    end
    local best = take_prioritized(ready_key, processing_key, prioritized_key)
    if best then
      return best
    end
  end
  return false
end

-- The marker that a worker's own BLMOVE moved into processing goes back to the
-- claim end of ready, for claim_ready to take.
local function return_marker(ready_key, processing_key)
  redis.call("lrem", processing_key, 1, PRIORITY_MARKER)
  redis.call("rpush", ready_key, PRIORITY_MARKER)
end
