"""The recovery invariant, checked against what Redis holds.

Every run whose status is ``queued`` or ``running`` is in its queue's ready
or processing list (so a worker claims it, or the reaper returns it to ready
once no lease covers it), or, queued, in its queue's prioritized zset (the
marker in ready stands for it) or in the held list of one of its limits (a
unit given back wakes it); and every ``scheduled`` run is in its queue's
scheduled zset (so the promoter finds it). A run that breaks this is stuck
for good: nothing ever looks at it again.

The check is one Lua script per batch: an atomic snapshot, so that it can
run while workers move the runs (a check made of separate reads would see a
run between two of its moves).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from helpers import LONG_TESTS

from redflow.core.keys import TERMINAL_STATUSES

_CHECK_LUA = """
-- KEYS: per run, 5 keys: run, ready, processing, scheduled, prioritized; ARGV: the run ids
local function held(run_key, run_id)
  local ok, spec = pcall(cjson.decode, redis.call("hget", run_key, "limitsJson") or "")
  for _, entry in ipairs(ok and type(spec) == "table" and spec.c or {}) do
    if redis.call("lpos", entry[2], run_id) then
      return true
    end
  end
  return false
end
local broken = {}
for i, run_id in ipairs(ARGV) do
  local base = (i - 1) * 5
  local status = redis.call("hget", KEYS[base + 1], "status")
  if status == "queued" and (redis.call("zscore", KEYS[base + 5], run_id) or held(KEYS[base + 1], run_id)) then
    -- waiting for the marker, or for a unit of a limit
  elseif status == "queued" or status == "running" then
    if not redis.call("lpos", KEYS[base + 2], run_id) and not redis.call("lpos", KEYS[base + 3], run_id) then
      table.insert(broken, run_id)
      table.insert(broken, status .. " but in neither ready nor processing")
    end
  elseif status == "scheduled" and not redis.call("zscore", KEYS[base + 4], run_id) then
    table.insert(broken, run_id)
    table.insert(broken, "scheduled but not in the scheduled zset")
  end
end
return broken
"""
_BATCH = 200


def unrecoverable(r: Any, keys: Any, run_ids: Iterable[str], queue: str = "default") -> dict[str, str]:
    """``{run id: why}`` for every run recovery cannot find (empty when the invariant holds)."""
    run_ids = list(run_ids)
    broken: dict[str, str] = {}
    for start in range(0, len(run_ids), _BATCH):
        batch = run_ids[start : start + _BATCH]
        script_keys = []
        for run_id in batch:
            script_keys += [keys.run(run_id, queue), keys.queue_ready(queue), keys.queue_processing(queue),
                            keys.queue_scheduled(queue), keys.queue_prioritized(queue)]  # fmt: skip
        flat = r.eval(_CHECK_LUA, len(script_keys), *script_keys, *batch)
        broken.update(zip(flat[::2], flat[1::2]))
    return broken


def assert_every_run_ended(r: Any, keys: Any, run_ids: Iterable[str]) -> None:
    """The end of a state machine's teardown: once the faults stopped, every run is terminal."""
    statuses = {run_id: r.hget(keys.run(run_id), "status") for run_id in run_ids}
    assert all(s in TERMINAL_STATUSES for s in statuses.values()), f"runs that never ended: {statuses}"


def drop_prefix(r: Any, prefix: str) -> None:
    """Delete every key of a state machine's own prefix."""
    for key in r.scan_iter(f"{prefix}:*", count=1000):
        r.delete(key)


def machine_settings(*, bounded_examples: int, long_examples: int, step_count: int) -> Any:
    """Hypothesis settings of the suite's state machines: reproducible, no deadline, and a fixed
    budget of examples: ``bounded_examples`` in scripts/test, ``long_examples`` with
    ``REDFLOW_LONG_TESTS=1`` (tests/helpers.py)."""
    from hypothesis import HealthCheck, settings

    max_examples = long_examples if LONG_TESTS else bounded_examples
    return settings(max_examples=max_examples, stateful_step_count=step_count, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
