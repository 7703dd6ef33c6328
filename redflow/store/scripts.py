"""Every Lua script redflow runs, each with one typed wrapper.

Each multi-key state change that must be atomic is one script. Scripts are
registered once per client with redis-py's ``register_script`` so calls use
EVALSHA (reloading on NOSCRIPT), and each script touches only the keys
passed in, so Redis Cluster needs changes in ``keys.py`` alone.

The six ``runs:status:*`` zsets are always passed together, in
``keys.RUN_STATUSES`` order, so that a status change can move a run between
them. Wrappers accept ``conn=``: a worker slot's dedicated connection, a
pipeline, or ``None`` for the client's pool.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from redis.exceptions import AskError, ClusterDownError, ConnectionError, MovedError, TryAgainError

from redflow.store.connection import is_cluster
from redflow.core.keys import Keys

#: How long the wake-up token of a finished run lives (waiters re-read the
#: run hash first, so the token only matters to waiters already blocked).
WAKE_TTL_MS = 10 * 60 * 1000

# Lua helpers shared by the scripts below. ``S`` is the KEYS offset of the six
# status index zsets (KEYS[S+1] .. KEYS[S+6]).
_STATUS_LUA = """
local STATUS_INDEX = {scheduled = 1, queued = 2, running = 3, succeeded = 4, failed = 5, canceled = 6}
local TERMINAL = {succeeded = true, failed = true, canceled = true}

-- ``fields``: more field/value pairs written with the status (one HSET).
local function move_status(run_key, S, run_id, prev, next_status, at, fields)
  if prev and STATUS_INDEX[prev] then
    redis.call("zrem", KEYS[S + STATUS_INDEX[prev]], run_id)
  end
  if fields then
    redis.call("hset", run_key, "status", next_status, unpack(fields))
  else
    redis.call("hset", run_key, "status", next_status)
  end
  redis.call("zadd", KEYS[S + STATUS_INDEX[next_status]], at, run_id)
end
"""

# Whether an attempt still owns its run: it holds the lease, or (when it
# ``may_retake``) nobody does and the run is still running and still in
# processing (the lease lapsed but no reaper or worker took the run over),
# in which case the lease is taken again. The reaper's check is atomic too,
# so exactly one side wins. Progress (a step's result, the run's end) may
# retake a lapsed lease; the keeper's bookkeeping (renewals, markers) may not,
# so that a lapsed lease stops an attempt that is only waiting.
_OWNS_LUA = """
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
"""

# Turns a run terminal. A cancel request wins over succeeded/failed, as in
# the seed's finalizeRun. Pushes the wake-up token for waiters.
_FINALIZE_LUA = (
    _STATUS_LUA
    + """
local function finalize(run_key, S, done_key, run_id, prev, requested, cancel_at, at, output_json, error_json, wake_ttl)
  local final = requested
  if requested ~= "canceled" and cancel_at and cancel_at ~= "" then
    final = "canceled"
  end
  if final == "succeeded" then
    move_status(run_key, S, run_id, prev, final, at, {"outputJson", output_json, "finishedAt", at})
    redis.call("hdel", run_key, "availableAt", "errorJson")
  elseif error_json ~= "" then
    move_status(run_key, S, run_id, prev, final, at, {"errorJson", error_json, "finishedAt", at})
    redis.call("hdel", run_key, "availableAt", "outputJson")
  else
    move_status(run_key, S, run_id, prev, final, at, {"finishedAt", at})
    redis.call("hdel", run_key, "availableAt", "outputJson")
  end
  redis.call("rpush", done_key, "1")
  redis.call("pexpire", done_key, wake_ttl)
  return final
end
"""
)

ENQUEUE_RUN_LUA = """
-- Create a run and enqueue it, or return the run its idempotency key holds.
-- KEYS: 1 run, 2 runs:created, 3 status:queued, 4 status:scheduled,
--       5 workflow-runs, 6 ready, 7 queue scheduled, 8 idempotency key
-- ARGV: 1 run id, 2 workflow, 3 queue, 4 inputJson, 5 createdAt,
--       6 availableAt (<= createdAt: now), 7 maxAttempts, 8 "1" if idempotent,
--       9 idempotency ttl s, 10 run id the key may be replaced from
--       (a failed/canceled/missing run the client saw), 11 parentRunId
-- Returns {"created", id} or {"existing", id}.
if ARGV[8] == "1" then
  local current = redis.call("get", KEYS[8])
  if current and current ~= "" and current ~= ARGV[10] then
    redis.call("expire", KEYS[8], ARGV[9])
    return {"existing", current}
  end
  redis.call("set", KEYS[8], ARGV[1], "EX", ARGV[9])
end
local scheduled = tonumber(ARGV[6]) > tonumber(ARGV[5])
local status = scheduled and "scheduled" or "queued"
redis.call("hset", KEYS[1],
  "workflow", ARGV[2], "queue", ARGV[3], "status", status, "inputJson", ARGV[4],
  "attempt", "0", "maxAttempts", ARGV[7], "createdAt", ARGV[5],
  "cancelRequestedAt", "", "cancelReason", "")
if ARGV[11] ~= "" then
  redis.call("hset", KEYS[1], "parentRunId", ARGV[11])
end
redis.call("zadd", KEYS[2], ARGV[5], ARGV[1])
redis.call("zadd", KEYS[5], ARGV[5], ARGV[1])
if scheduled then
  redis.call("hset", KEYS[1], "availableAt", ARGV[6])
  redis.call("zadd", KEYS[4], ARGV[5], ARGV[1])
  redis.call("zadd", KEYS[7], ARGV[6], ARGV[1])
else
  redis.call("zadd", KEYS[3], ARGV[5], ARGV[1])
  redis.call("lpush", KEYS[6], ARGV[1])
end
return {"created", ARGV[1]}
"""

START_RUN_LUA = (
    _STATUS_LUA
    + """
-- Start a claimed run: take its lease, load it, queued -> running (+1
-- attempt, startedAt on first pickup) and load its step cache, in one trip.
-- Idempotent for the same token, so a retried call after a lost reply
-- does not drop the run.
-- KEYS: 1 run, 2 steps, 3 lease, 4 processing, 5..10 status zsets
-- ARGV: 1 run id, 2 lease token, 3 lease ms, 4 now ms
-- Returns {"busy"} | {"missing"} | {"skip", status, workflow} | {"cancel", status, workflow}
--       | {"started", run fields, step fields}
local holder = redis.call("get", KEYS[3])
if holder and holder ~= ARGV[2] then
  -- Another attempt holds the run. Its processing entry stays: it may be
  -- the only one (the holder retook a lapsed lease after a reaper moved its
  -- own entry), and recovery finds the run through it if the holder dies.
  -- The holder's settle removes every entry of the run.
  return {"busy"}
end
local resumed = holder == ARGV[2]
redis.call("set", KEYS[3], ARGV[2], "PX", ARGV[3])
local function drop(reply)
  redis.call("del", KEYS[3])
  redis.call("lrem", KEYS[4], 0, ARGV[1])
  return reply
end
local run = redis.call("hmget", KEYS[1], "status", "workflow", "cancelRequestedAt", "startedAt")
local status, workflow, cancel_at, started_at = run[1], run[2] or "", run[3], run[4]
if not status then
  return drop({"missing"})
end
if status ~= "queued" and status ~= "running" then
  return drop({"skip", status, workflow})
end
if cancel_at and cancel_at ~= "" then
  return {"cancel", status, workflow}
end
local first_pickup = not started_at or started_at == ""
if status == "queued" and not resumed then
  move_status(KEYS[1], 4, ARGV[1], "queued", "running", ARGV[4], first_pickup and {"startedAt", ARGV[4]} or nil)
  redis.call("hincrby", KEYS[1], "attempt", 1)
elseif first_pickup then
  redis.call("hset", KEYS[1], "startedAt", ARGV[4])
end
return {"started", redis.call("hgetall", KEYS[1]), redis.call("hgetall", KEYS[2])}
"""
)

SETTLE_RUN_LUA = (
    _FINALIZE_LUA
    + _OWNS_LUA
    + """
-- End one attempt: finalize (succeeded / failed / canceled) or schedule a
-- retry, remove the run from processing and release the lease, in one trip.
-- Refuses when this attempt no longer owns the run (see owns), and never
-- finalizes a run twice: a repeated call finds it terminal and changes nothing.
-- KEYS: 1 run, 2..7 status zsets, 8 processing, 9 lease, 10 done, 11 queue scheduled
-- ARGV: 1 run id, 2 status (succeeded|failed|canceled|scheduled), 3 now ms,
--       4 outputJson, 5 errorJson, 6 lease token, 7 wake ttl ms, 8 retry at ms, 9 lease ms
-- Returns the status the run ended in, "stale" or "missing".
local function release(reply)
  redis.call("lrem", KEYS[8], 0, ARGV[1])
  if redis.call("get", KEYS[9]) == ARGV[6] then
    redis.call("del", KEYS[9])
  end
  return reply
end
local run = redis.call("hmget", KEYS[1], "status", "cancelRequestedAt")
local prev, cancel_at = run[1], run[2]
if not prev then
  return release("missing")
end
if TERMINAL[prev] then
  return release(prev)
end
if not owns(KEYS[9], ARGV[6], prev, KEYS[8], ARGV[1], ARGV[9], true) then
  return "stale"
end
local requested = ARGV[2]
if requested == "scheduled" then
  if cancel_at and cancel_at ~= "" then
    requested = "canceled"
  else
    move_status(KEYS[1], 1, ARGV[1], prev, "scheduled", ARGV[3], {"availableAt", ARGV[8], "errorJson", ARGV[5]})
    redis.call("zadd", KEYS[11], ARGV[8], ARGV[1])
    return release("scheduled")
  end
end
local final = finalize(KEYS[1], 1, KEYS[10], ARGV[1], prev, requested, cancel_at, ARGV[3], ARGV[4], ARGV[5], ARGV[7])
if prev == "scheduled" then
  redis.call("zrem", KEYS[11], ARGV[1])
end
return release(final)
"""
)

CANCEL_RUN_LUA = (
    _FINALIZE_LUA
    + """
-- Client cancel: a queued or scheduled run is canceled at once, and so is a
-- running one whose lease is gone (nobody is executing it: its worker died
-- or stalled; a stalled one is refused at its next write). A running run
-- whose lease is held gets cancelRequestedAt, and its worker stops it.
-- KEYS: 1 run, 2..7 status zsets, 8 done, 9 queue scheduled, 10 lease, 11 processing
-- ARGV: 1 run id, 2 now ms, 3 reason, 4 errorJson, 5 wake ttl ms
-- Returns "canceled" | "requested" | "terminal" | "missing".
local prev = redis.call("hget", KEYS[1], "status")
if not prev then
  return "missing"
end
if TERMINAL[prev] then
  return "terminal"
end
redis.call("hset", KEYS[1], "cancelRequestedAt", ARGV[2], "cancelReason", ARGV[3])
local unheld = prev == "running" and redis.call("exists", KEYS[10]) == 0
if prev == "queued" or prev == "scheduled" or unheld then
  finalize(KEYS[1], 1, KEYS[8], ARGV[1], prev, "canceled", ARGV[2], ARGV[2], "", ARGV[4], ARGV[5])
  redis.call("zrem", KEYS[9], ARGV[1])
  if unheld then
    redis.call("lrem", KEYS[11], 0, ARGV[1])
  end
  return "canceled"
end
return "requested"
"""
)

RETRY_RUN_LUA = (
    _STATUS_LUA
    + """
-- Manual retry of a failed or canceled run: back to queued under the same
-- id, so its succeeded steps replay; it gets a fresh attempt budget. A
-- running run that nobody holds (no lease: its worker died or stalled) goes
-- to the claim end of ready as it is, as the reaper would move it, which
-- also frees a run some older version left in no list at all.
-- KEYS: 1 run, 2..7 status zsets, 8 ready, 9 done, 10 lease, 11 processing
-- ARGV: 1 run id, 2 now ms
-- Returns {"queued" | "requeued" | "not_retryable" | "missing", previous status}
-- ("not_retryable" with "running" means a live worker holds the run).
local prev = redis.call("hget", KEYS[1], "status")
if not prev then
  return {"missing", ""}
end
if prev == "running" and redis.call("exists", KEYS[10]) == 0 then
  redis.call("hset", KEYS[1], "cancelRequestedAt", "", "cancelReason", "")
  redis.call("lrem", KEYS[11], 0, ARGV[1])
  redis.call("rpush", KEYS[8], ARGV[1])
  return {"requeued", prev}
end
if prev ~= "failed" and prev ~= "canceled" then
  return {"not_retryable", prev}
end
local attempt = tonumber(redis.call("hget", KEYS[1], "attempt")) or 0
local budget = tonumber(redis.call("hget", KEYS[1], "maxAttempts")) or 1
if budget < 1 then budget = 1 end
move_status(KEYS[1], 1, ARGV[1], prev, "queued", ARGV[2])
redis.call("hdel", KEYS[1], "finishedAt", "errorJson", "outputJson", "availableAt")
redis.call("hset", KEYS[1], "cancelRequestedAt", "", "cancelReason", "", "maxAttempts", tostring(attempt + budget))
redis.call("del", KEYS[9])
redis.call("lpush", KEYS[8], ARGV[1])
return {"queued", prev}
"""
)

PROMOTE_RUN_LUA = """
-- Promoter: a due scheduled run -> queued, pushed to ready.
-- KEYS: 1 run, 2 queue scheduled, 3 status:scheduled, 4 status:queued, 5 ready
-- ARGV: 1 run id, 2 now ms
-- Returns "promoted" | "not_due" | "missing" | "stale".
local score = redis.call("zscore", KEYS[2], ARGV[1])
if not score then
  return "missing"
end
if tonumber(score) > tonumber(ARGV[2]) then
  return "not_due"
end
redis.call("zrem", KEYS[2], ARGV[1])
if redis.call("hget", KEYS[1], "status") ~= "scheduled" then
  return "stale"
end
redis.call("zrem", KEYS[3], ARGV[1])
redis.call("hset", KEYS[1], "status", "queued")
redis.call("hdel", KEYS[1], "availableAt")
redis.call("zadd", KEYS[4], ARGV[2], ARGV[1])
redis.call("lpush", KEYS[5], ARGV[1])
return "promoted"
"""

# The seed's scripts, unchanged in behaviour.
UNLOCK_LUA = """
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end
"""

RENEW_LEASE_LUA = """
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
else
  return nil
end
"""

CLAIM_QUEUED_RUN_FOR_INLINE_LUA = """
if redis.call("hget", KEYS[3], "status") ~= "queued" then
  return 0
end

if redis.call("lrem", KEYS[1], 1, ARGV[1]) <= 0 then
  return 0
end

redis.call("lpush", KEYS[2], ARGV[1])
return 1
"""

SAVE_STEP_LUA = (
    _OWNS_LUA
    + """
-- Record one step if this attempt still owns the run (see owns), and extend
-- the lease (a run that makes progress keeps its lease even if the keeper is
-- late); returns the run's cancelRequestedAt so that a step boundary notices
-- a cancel for free. With ARGV[4] = startedAt of a step still going, only
-- writes the "running" marker if no record of that execution (or a success)
-- is there already.
-- KEYS: 1 steps, 2 lease, 3 run, 4 processing
-- ARGV: 1 lease token, 2 step name, 3 step JSON, 4 marker startedAt or "", 5 lease ms, 6 run id
-- Returns {"saved"|"kept"|"stale", cancelRequestedAt}.
local run = redis.call("hmget", KEYS[3], "status", "cancelRequestedAt")
if not owns(KEYS[2], ARGV[1], run[1], KEYS[4], ARGV[6], ARGV[5], ARGV[4] == "") then
  return {"stale", ""}
end
redis.call("pexpire", KEYS[2], ARGV[5])
local cancel_at = run[2] or ""
if ARGV[4] ~= "" then
  local current = redis.call("hget", KEYS[1], ARGV[2])
  if current then
    local ok, record = pcall(cjson.decode, current)
    if ok and type(record) == "table" and
      (record.status == "succeeded" or tostring(record.startedAt) == ARGV[4]) then
      return {"kept", cancel_at}
    end
  end
end
redis.call("hset", KEYS[1], ARGV[2], ARGV[3])
return {"saved", cancel_at}
"""
)

PURGE_INVALID_ENTRIES_LUA = """
-- A processing list entry that cannot be a run id (not ``[A-Za-z0-9_:.-]``,
-- e.g. binary bytes) is removed, by its raw bytes, which a decoded reply
-- cannot name; returns the removed entries.
-- KEYS: 1 processing
local removed = {}
for _, entry in ipairs(redis.call("lrange", KEYS[1], 0, -1)) do
  if not string.match(entry, "^[%w_:%.%-]+$") then
    redis.call("lrem", KEYS[1], 0, entry)
    table.insert(removed, entry)
  end
end
return removed
"""

REAP_RUN_LUA = """
-- Reaper: a processing entry whose lease is gone goes back to ready (at the
-- claim end, so a recovered run is next). Atomic, unlike the seed's GET + LREM.
-- KEYS: 1 processing, 2 ready, 3 lease
-- ARGV: 1 run id
if redis.call("exists", KEYS[3]) == 1 then
  return 0
end
if redis.call("lrem", KEYS[1], 1, ARGV[1]) > 0 then
  redis.call("rpush", KEYS[2], ARGV[1])
  return 1
end
return 0
"""

REPAIR_ORPHAN_LUA = """
-- Sweeper: a running run that recovery cannot find (no lease, and in neither
-- its queue's processing nor its ready list; older versions' "busy" path
-- could leave one so) goes to the claim end of ready, as the reaper moves a
-- run whose lease is gone. Everything is re-checked here, atomically.
-- KEYS: 1 run, 2 lease, 3 processing, 4 ready
-- ARGV: 1 run id
-- Returns 1 if the run was requeued, else 0.
if redis.call("hget", KEYS[1], "status") ~= "running" or redis.call("exists", KEYS[2]) == 1 then
  return 0
end
if redis.call("lpos", KEYS[3], ARGV[1]) or redis.call("lpos", KEYS[4], ARGV[1], "RANK", -1) then
  return 0
end
redis.call("rpush", KEYS[4], ARGV[1])
return 1
"""


class Scripts:
    """The scripts registered on one redis-py client, with typed wrappers."""

    def __init__(self, redis: Any, keys: Keys) -> None:
        self.keys = keys
        self._redis = redis
        register = redis.register_script
        self._enqueue = register(ENQUEUE_RUN_LUA)
        self._start = register(START_RUN_LUA)
        self._settle = register(SETTLE_RUN_LUA)
        self._cancel = register(CANCEL_RUN_LUA)
        self._promote = register(PROMOTE_RUN_LUA)
        self._retry = register(RETRY_RUN_LUA)
        self._unlock = register(UNLOCK_LUA)
        self._renew = register(RENEW_LEASE_LUA)
        self._claim_inline = register(CLAIM_QUEUED_RUN_FOR_INLINE_LUA)
        self._save_step = register(SAVE_STEP_LUA)
        self._reap = register(REAP_RUN_LUA)
        self._purge = register(PURGE_INVALID_ENTRIES_LUA)
        self._repair = register(REPAIR_ORPHAN_LUA)

    def load_all(self) -> None:
        """Load every script (on every primary of a cluster): pipelines on
        Redis Cluster do not load them by themselves, and a promoted replica
        has an empty script cache."""
        for script in (
            self._enqueue, self._start, self._settle, self._cancel, self._promote, self._retry,
            self._unlock, self._renew, self._claim_inline, self._save_step, self._reap, self._purge, self._repair,
        ):  # fmt: skip
            script.sha = self._redis.script_load(script.script)

    def batch(self) -> Batch:
        """Commands and scripts to send together (see :class:`Batch`)."""
        return Batch(self._redis)

    def _call(self, script: Any, keys: Sequence[str], args: Sequence[Any], conn: Any) -> Any:
        run_script = getattr(conn, "run_script", None)  # a slot's connection or a batch
        if run_script is not None:
            return run_script(script, keys, args)
        return script(keys=keys, args=args, client=conn if conn is not None else self._redis)

    def enqueue_run(
        self,
        *,
        run_id: str,
        workflow: str,
        queue: str,
        input_json: str,
        created_at: int,
        available_at: int,
        max_attempts: int,
        idempotency_key: str | None,
        idempotency_ttl_s: int,
        replace_id: str = "",
        parent_run_id: str = "",
        conn: Any = None,
    ) -> Any:
        """Returns ``["created" | "existing", run id]`` (on a pipeline: the pipeline)."""
        k = self.keys
        run_key = k.run(run_id, queue)
        idem_key = k.idempotency(workflow, idempotency_key, queue) if idempotency_key is not None else run_key
        keys = [
            run_key, k.runs_created(queue), k.runs_status("queued", queue), k.runs_status("scheduled", queue),
            k.workflow_runs(workflow, queue), k.queue_ready(queue), k.queue_scheduled(queue), idem_key,
        ]  # fmt: skip
        args = [
            run_id, workflow, queue, input_json, created_at, available_at, max_attempts,
            "1" if idempotency_key is not None else "0", idempotency_ttl_s, replace_id, parent_run_id,
        ]  # fmt: skip
        return self._call(self._enqueue, keys, args, conn)

    def start_run(self, *, run_id: str, queue: str, token: str, lease_ms: int, now: int, conn: Any = None) -> list[Any]:
        k = self.keys
        keys = [
            k.run(run_id, queue), k.run_steps(run_id, queue), k.run_lease(run_id, queue), k.queue_processing(queue),
            *k.all_runs_status(queue),
        ]  # fmt: skip
        return self._call(self._start, keys, [run_id, token, lease_ms, now], conn)

    def settle_run(
        self,
        *,
        run_id: str,
        queue: str,
        status: str,
        now: int,
        token: str,
        lease_ms: int,
        output_json: str = "",
        error_json: str = "",
        retry_at: int = 0,
        conn: Any = None,
    ) -> str:
        """Finalize (``status`` terminal) or schedule a retry (``status="scheduled"``)."""
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.queue_processing(queue), k.run_lease(run_id, queue),
            k.run_done(run_id, queue), k.queue_scheduled(queue),
        ]  # fmt: skip
        args = [run_id, status, now, output_json, error_json, token, WAKE_TTL_MS, retry_at, lease_ms]
        return self._call(self._settle, keys, args, conn)

    def cancel_run(self, *, run_id: str, queue: str, now: int, reason: str, error_json: str, conn: Any = None) -> str:
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.run_done(run_id, queue), k.queue_scheduled(queue),
            k.run_lease(run_id, queue), k.queue_processing(queue),
        ]  # fmt: skip
        return self._call(self._cancel, keys, [run_id, now, reason, error_json, WAKE_TTL_MS], conn)

    def retry_run(self, *, run_id: str, queue: str, now: int, conn: Any = None) -> Any:
        """Returns ``["queued" | "requeued" | "not_retryable" | "missing", previous status]``."""
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.queue_ready(queue), k.run_done(run_id, queue),
            k.run_lease(run_id, queue), k.queue_processing(queue),
        ]  # fmt: skip
        return self._call(self._retry, keys, [run_id, now], conn)

    def promote_run(self, *, run_id: str, queue: str, now: int, conn: Any = None) -> str:
        k = self.keys
        keys = [
            k.run(run_id, queue), k.queue_scheduled(queue), k.runs_status("scheduled", queue), k.runs_status("queued", queue),
            k.queue_ready(queue),
        ]  # fmt: skip
        return self._call(self._promote, keys, [run_id, now], conn)

    def renew_lease(self, *, lease_key: str, token: str, lease_ms: int, conn: Any = None) -> Any:
        """Truthy if renewed; ``None`` when the lease is not ours any more."""
        return self._call(self._renew, [lease_key], [token, lease_ms], conn)

    def unlock(self, *, lease_key: str, token: str, conn: Any = None) -> bool:
        return bool(self._call(self._unlock, [lease_key], [token], conn))

    def claim_queued_run_for_inline(self, *, run_id: str, queue: str, conn: Any = None) -> bool:
        k = self.keys
        keys = [k.queue_ready(queue), k.queue_processing(queue), k.run(run_id, queue)]
        return self._call(self._claim_inline, keys, [run_id], conn) == 1

    def save_step(
        self,
        *,
        run_id: str,
        queue: str,
        token: str,
        name: str,
        step_json: str,
        lease_ms: int,
        marker_started_at: int | None = None,
        conn: Any = None,
    ) -> Any:
        """Returns ``["saved" | "kept" | "stale", cancelRequestedAt]`` (on a pipeline: the pipeline)."""
        k = self.keys
        keys = [k.run_steps(run_id, queue), k.run_lease(run_id, queue), k.run(run_id, queue), k.queue_processing(queue)]
        marker = "" if marker_started_at is None else str(marker_started_at)
        return self._call(self._save_step, keys, [token, name, step_json, marker, lease_ms, run_id], conn)

    def purge_invalid_entries(self, *, queue: str, conn: Any = None) -> list[str]:
        """Remove processing entries that cannot be run ids; returns them (decoded with U+FFFD)."""
        return self._call(self._purge, [self.keys.queue_processing(queue)], [], conn)

    def reap_run(self, *, run_id: str, queue: str, conn: Any = None) -> bool:
        k = self.keys
        keys = [k.queue_processing(queue), k.queue_ready(queue), k.run_lease(run_id, queue)]
        return self._call(self._reap, keys, [run_id], conn) == 1

    def repair_orphan(self, *, run_id: str, queue: str, conn: Any = None) -> Any:
        """1 if the running run was in no list and unleased, and is now in ready (on a pipeline: the pipeline)."""
        k = self.keys
        keys = [k.run(run_id, queue), k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_ready(queue)]
        return self._call(self._repair, keys, [run_id], conn)



_REDIRECTS = (MovedError, AskError, TryAgainError, ClusterDownError, ConnectionError)


class Batch:
    """Commands and scripts sent together, replies in call order.

    On one Redis it is one pipeline. redis-py refuses scripts in Redis
    Cluster pipelines, so on a cluster it is one pipeline per master (each
    item goes to the master of its first key's slot); an item whose slot
    moved meanwhile (failover) is sent again through the cluster client.
    Use it like a pipeline: ``batch.hget(key, field)``, script wrappers with
    ``conn=batch``, then ``batch.execute()``.
    """

    def __init__(self, redis: Any) -> None:
        self._redis = redis
        self._cluster = is_cluster(redis)
        self._items: list[tuple[Any, Callable[[Any], Any]]] = []  # (routing key, apply(client))

    def __len__(self) -> int:
        return len(self._items)

    def __getattr__(self, name: str) -> Callable[..., Batch]:
        def record(*args: Any, **kwargs: Any) -> Batch:
            self._items.append((args[0], lambda client: getattr(client, name)(*args, **kwargs)))
            return self

        return record

    def run_script(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Batch:
        self._items.append((keys[0], lambda client: script(keys=keys, args=args, client=client)))
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        items, self._items = self._items, []
        if not items:
            return []
        if not self._cluster:
            pipe = self._redis.pipeline(transaction=False)
            for _, apply in items:
                apply(pipe)
            return pipe.execute(raise_on_error=raise_on_error)
        replies = self._execute_per_master(items)
        for index, reply in enumerate(replies):
            if isinstance(reply, _REDIRECTS):
                self._redis.nodes_manager.initialize()
                try:
                    replies[index] = items[index][1](self._redis)
                except Exception as exc:  # kept as a reply, like a pipeline's error
                    replies[index] = exc
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    def _execute_per_master(self, items: list[tuple[Any, Callable[[Any], Any]]]) -> list[Any]:
        cluster = self._redis
        groups: dict[str, tuple[Any, list[int]]] = {}
        for index, (key, _) in enumerate(items):
            node = cluster.nodes_manager.get_node_from_slot(cluster.keyslot(key))
            groups.setdefault(node.name, (node, []))[1].append(index)
        replies: list[Any] = [None] * len(items)
        for node, indexes in groups.values():
            pipe = node.redis_connection.pipeline(transaction=False)
            for index in indexes:
                items[index][1](pipe)
            try:
                node_replies = pipe.execute(raise_on_error=False)
            except ConnectionError as exc:  # the master is gone: its items go through the cluster client
                node_replies = [exc] * len(indexes)
            for index, reply in zip(indexes, node_replies):
                replies[index] = reply
        return replies
