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

import re
from collections.abc import Iterable
from typing import Any

from helpers import LONG_TESTS

from redflow.core import codec
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


# -- rate limits, by Redis's clock ------------------------------------------------------


def rate_breaches(starts: dict[str, tuple[int, int]], limit: int, period_ms: int) -> list[str]:
    """Proven breaches of "never more than ``limit`` starts in any window of
    ``period_ms``": ``starts`` maps a start (``<run id>:<attempt>``) to the
    bounds (lo, hi], in Redis's ms, between which Redis admitted it. A breach is
    ``limit + 1`` starts that all lie within less than the period whatever
    their exact times in their bounds, so coarse bounds never make one up."""
    spans = sorted(starts.items(), key=lambda item: item[1][0])
    breaches = []
    for index, (_, (lo, _)) in enumerate(spans):
        later = sorted(spans[index:], key=lambda item: item[1][1])[: limit + 1]
        if len(later) == limit + 1 and later[-1][1][1] - lo < period_ms:
            names = ", ".join(f"{name} in ({a}, {b}]" for name, (a, b) in later)
            breaches.append(f"{limit + 1} starts within {later[-1][1][1] - lo} ms < {period_ms} ms (by Redis's clock): {names}")
    return breaches


def server_ms(r: Any) -> int:
    """Redis's clock now, in integer ms."""
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


# -- what live runs need, and what retention must reach ------------------------------------

_MISSING_CHILDREN_LUA = """
-- KEYS: per parent, 2 keys: run, steps; ARGV: run key prefix, the step, the parent ids
-- Returns {parent, child, ...}: children a live parent waits for in ``step`` (its
-- waiting record names them; once it has collected them the record says succeeded)
-- whose run hash is gone. One script: an atomic view, so a parent that just ended
-- and a child purged right after are never taken for a live one.
local prefix, step = ARGV[1], ARGV[2]
local live = {scheduled = true, queued = true, running = true}
local missing = {}
for i = 3, #ARGV do
  local base = (i - 3) * 2
  if live[redis.call("hget", KEYS[base + 1], "status") or ""] then
    local ok, record = pcall(cjson.decode, redis.call("hget", KEYS[base + 2], step) or "")
    local wait = ok and type(record) == "table" and record.status == "running" and record.wait
    if type(wait) == "table" and type(wait.children) == "table" then
      for _, id in ipairs(wait.children) do
        if redis.call("exists", prefix .. id) == 0 then
          table.insert(missing, ARGV[i])
          table.insert(missing, id)
        end
      end
    end
  end
end
return missing
"""


def children_missing(r: Any, keys: Any, parent_ids: Iterable[str], step: str) -> dict[str, set[str]]:
    """``{parent: children}``: children a live parent waits for in its
    ``run_workflows`` step ``step`` (not collected yet) that were deleted
    (empty when none were)."""
    parents = list(parent_ids)
    missing: dict[str, set[str]] = {}
    for start in range(0, len(parents), _BATCH):
        batch = parents[start : start + _BATCH]
        script_keys = [key for p in batch for key in (keys.run(p), keys.run_steps(p))]
        flat = r.eval(_MISSING_CHILDREN_LUA, len(script_keys), *script_keys, keys.run_prefix(), step, *batch)
        for parent, child in zip(flat[::2], flat[1::2]):
            missing.setdefault(parent, set()).add(child)
    return missing


def events_resolving_twice(steps_of: dict[str, dict[str, str]], field: str = "eid") -> dict[str, dict[str, list[str]]]:
    """``{run: {event id: [steps]}}``: events (told apart by ``payload[field]``)
    that resolved more than one wait step of the same run; ``steps_of`` maps
    runs to their step records (a resolved record is never rewritten, so
    records read at different times can be judged together)."""
    twice: dict[str, dict[str, list[str]]] = {}
    for run_id, steps in steps_of.items():
        seen: dict[str, list[str]] = {}
        for step, raw in sorted(steps.items()):
            eid = (event_payload(raw) or {}).get(field)
            if isinstance(eid, str):
                seen.setdefault(eid, []).append(step)
        doubled = {eid: names for eid, names in seen.items() if len(names) > 1}
        if doubled:
            twice[run_id] = doubled
    return twice


def event_payload(raw_step: str | None) -> dict[str, Any] | None:
    """The payload a succeeded wait step holds (its output), if it is a dict."""
    record = codec.try_loads(raw_step) if raw_step else None
    if not isinstance(record, dict) or record.get("status") != "succeeded":
        return None
    output = codec.try_loads(record.get("outputJson") or "null")
    return output if isinstance(output, dict) else None


RUN_ID = re.compile(r"run_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def leftovers(r: Any, keys: Any, prefix: str) -> dict[str, str]:
    """``{key: why}``: keys of ``prefix`` that name a run whose hash is gone (in
    their name, or as a member, field, entry or value) and do not expire by
    themselves. Once every run has been purged, whatever this finds is a key
    retention and purge cannot reach: it stays for good."""
    found: dict[str, str] = {}
    exists: dict[str, bool] = {}

    def gone(text: str) -> list[str]:
        ids = [i for i in RUN_ID.findall(text) if i not in exists]
        if ids:
            pipe = r.pipeline(transaction=False)
            for run_id in ids:
                pipe.exists(keys.run(run_id))
            exists.update(zip(ids, map(bool, pipe.execute())))
        return sorted({i for i in RUN_ID.findall(text) if not exists[i]})

    for key in r.scan_iter(f"{prefix}:*", count=1000):
        if r.pttl(key) >= 0:
            continue  # it expires by itself
        kind = r.type(key)
        named = gone(key)
        if named:
            found[key] = f"a {kind} named after gone run(s) {named}"
            continue
        if kind == "zset":
            content = " ".join(r.zrange(key, 0, -1))
        elif kind == "set":
            content = " ".join(r.smembers(key))
        elif kind == "hash":
            content = " ".join(f"{k} {v}" for k, v in r.hgetall(key).items())
        elif kind == "list":
            content = " ".join(r.lrange(key, 0, -1))
        elif kind == "string":
            content = r.get(key) or ""
        else:
            content = ""
        named = gone(content)
        if named:
            found[key] = f"a {kind} that still names gone run(s) {named[:5]}{' ...' if len(named) > 5 else ''}"
    return found


# -- singleton keys and debounce windows (core/singleton.py) -----------------------------

_ONE_RUN_KEYS_LUA = """
-- KEYS: the singleton keys and debounce windows to check (none: every one of the prefix,
-- found with KEYS); ARGV: the prefix ("P:"). One script: an atomic view of every key,
-- window and run. Returns {what, why, ...}: a singleton key held but its run finished or
-- gone, an unfinished singleton run its key does not name (unless a replace canceled it),
-- a window whose run is no longer scheduled, a still scheduled debounced run no window names.
local p = ARGV[1]
local bad = {}
local function note(what, why)
  table.insert(bad, what)
  table.insert(bad, why)
end
local live = {scheduled = true, queued = true, running = true}
local named = KEYS
if #named == 0 then
  named = redis.call("keys", p .. "singleton:*")
  for _, key in ipairs(redis.call("keys", p .. "debounce:*")) do
    table.insert(named, key)
  end
end
for _, key in ipairs(named) do
  local holder = redis.call("get", key)
  if holder and string.find(key, p .. "singleton:", 1, true) == 1 then
    local run = redis.call("hmget", p .. "run:" .. holder, "status", "singletonKey")
    if not live[run[1] or ""] or run[2] ~= key then
      note(key, "held by " .. holder .. " which is " .. (run[1] or "gone"))
    end
  elseif holder then
    local run = redis.call("hmget", p .. "run:" .. holder, "status", "attempt", "debounceKey")
    if run[1] ~= "scheduled" or run[2] ~= "0" or run[3] ~= key then
      note(key, "names " .. holder .. " which is " .. (run[1] or "gone") .. " (attempt " .. (run[2] or "-") .. ")")
    end
  end
end
for _, run_id in ipairs(redis.call("zrange", p .. "runs:created", 0, -1)) do
  local run = redis.call("hmget", p .. "run:" .. run_id, "status", "singletonKey", "cancelRequestedAt", "debounceKey", "attempt", "heldBy")
  if run[2] and live[run[1] or ""] and (run[3] or "") == "" and redis.call("get", run[2]) ~= run_id then
    note(run_id, "unfinished (" .. run[1] .. ") but its singleton key names " .. tostring(redis.call("get", run[2])))
  end
  if run[4] and run[1] == "scheduled" and run[5] == "0" and not run[6] and redis.call("get", run[4]) ~= run_id then
    note(run_id, "still scheduled but its debounce window names " .. tostring(redis.call("get", run[4])))
  end
end
return bad
"""


def one_run_key_breaches(r: Any, keys: Any, names: Iterable[str] = ()) -> dict[str, str]:
    """``{key or run id: why}`` where "a singleton key is held iff its run is unfinished; a
    debounce window exists iff its run is still scheduled" fails (not cluster mode);
    ``names``: the keys and windows to check (default: every one of the prefix)."""
    names = list(names)
    flat = r.eval(_ONE_RUN_KEYS_LUA, len(names), *names, keys.prefix + ":")
    return dict(zip(flat[::2], flat[1::2]))


def assert_one_run_keys(r: Any, keys: Any) -> None:
    breaches = one_run_key_breaches(r, keys)
    assert not breaches, breaches
