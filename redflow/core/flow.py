"""Flow control values: concurrency limits, rate limits and priorities (no I/O).

A run carries the limits that apply to it in its ``limitsJson`` field: the
client computes them when it enqueues the run (``key=`` functions are Python,
called on the validated input), or a worker does when another client enqueued
it without them. The scripts that start and end runs read that field, so a
workflow without limits costs nothing there. :func:`limits_spec` spells it:

``{"w": counter, "h": held set, "i": held index, "q": ready list, "s": scheduled zset,
"c": [[units set or "" for the counter, held list, limit], ...], "r": [window, cursor, limit, period ms]}``

(``r`` only with a rate limit); ``store/lua/limits.lua`` reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from redflow.core import codec
from redflow.core.errors import CorruptDataError, InputValidationError, RedflowError
from redflow.core.keys import Keys

#: The ready-list entry that stands for a queue's prioritized runs; must equal
#: ``PRIORITY_MARKER`` in ``store/lua/priority.lua``.
PRIORITY_MARKER: Final = "__redflow:prioritized__"
MAX_PRIORITY: Final = 9

KeyFn = Callable[[Any], Any]


def _check_limit(limit: Any, what: str) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise RedflowError(f"{what}: limit must be an int >= 1, got {limit!r}")


def _check_key(key: Any, what: str) -> None:
    if key is not None and not callable(key):
        raise RedflowError(f"{what}: key must be a function of the input (or None), got {key!r}")


@dataclass(frozen=True, slots=True)
class Concurrency:
    """At most ``limit`` runs of the workflow running at once across all
    workers; with ``key``, at most ``limit`` per value of ``key(input)``."""

    limit: int
    key: KeyFn | None = None

    def __post_init__(self) -> None:
        _check_limit(self.limit, "Concurrency")
        _check_key(self.key, "Concurrency")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``limit`` starts in any window of ``period`` seconds (a number
    or a timedelta) across all workers; with ``key``, per value of ``key(input)``."""

    limit: int
    period: float | timedelta
    key: KeyFn | None = None

    def __post_init__(self) -> None:
        _check_limit(self.limit, "RateLimit")
        _check_key(self.key, "RateLimit")
        period = self.period.total_seconds() if isinstance(self.period, timedelta) else self.period
        if not isinstance(period, (int, float)) or isinstance(period, bool) or not math.isfinite(period) or period < 0.001:
            raise RedflowError(f"RateLimit: period must be a number of seconds >= 0.001 (or a timedelta), got {self.period!r}")

    @property
    def period_ms(self) -> int:
        seconds = self.period.total_seconds() if isinstance(self.period, timedelta) else self.period
        return max(1, round(seconds * 1000))


@dataclass(frozen=True, slots=True)
class FlowControl:
    """The limits of one workflow, checked once at definition."""

    concurrency: tuple[Concurrency, ...] = ()
    rate_limit: RateLimit | None = None

    @classmethod
    def of(cls, workflow: str, concurrency: Concurrency | Iterable[Concurrency] | None, rate_limit: RateLimit | None) -> FlowControl:
        items = (concurrency,) if isinstance(concurrency, Concurrency) else tuple(concurrency or ())
        if any(not isinstance(c, Concurrency) for c in items):
            raise RedflowError(f"workflow {workflow!r}: concurrency= takes Concurrency(limit=, key=) values, got {items!r}")
        if sum(c.key is None for c in items) > 1:
            raise RedflowError(f"workflow {workflow!r}: at most one Concurrency without key= (the workflow-wide limit)")
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise RedflowError(f"workflow {workflow!r}: rate_limit= takes a RateLimit(limit=, period=, key=), got {rate_limit!r}")
        # The workflow-wide limit first: it is the cheapest to check.
        return cls(tuple(sorted(items, key=lambda c: c.key is not None)), rate_limit)

    @property
    def active(self) -> bool:
        return bool(self.concurrency) or self.rate_limit is not None

    @property
    def workflow_limit(self) -> int | None:
        """The workflow-wide concurrency limit (the asyncio package's ``maxConcurrency``), if any."""
        return next((c.limit for c in self.concurrency if c.key is None), None)

    def summary(self) -> dict[str, Any]:
        """What views show (stored in the workflow metadata by sync)."""
        out: dict[str, Any] = {"concurrency": [{"limit": c.limit, "keyed": c.key is not None} for c in self.concurrency]}
        if self.rate_limit is not None:
            r = self.rate_limit
            out["rate"] = {"limit": r.limit, "periodMs": r.period_ms, "keyed": r.key is not None}
        return out


def key_value(fn: KeyFn, value: Any, what: str) -> str:
    """``fn(value)`` as the text of a limit key: a str or an int; anything else,
    or an exception, is bad input for that limit."""
    try:
        result = fn(value)
    except Exception as exc:  # the key function's own error type is unknown to us
        raise InputValidationError(f"{what}: key= raised on the input: {type(exc).__name__}: {exc}") from exc
    if isinstance(result, bool) or not isinstance(result, (str, int)):
        raise InputValidationError(f"{what}: key= must return a str or an int, got {type(result).__name__}: {result!r}")
    return str(result)


def limits_spec(keys: Keys, workflow: str, queue: str, flow: FlowControl, value: Any) -> str:
    """The ``limitsJson`` of a run of ``workflow`` on ``queue`` with validated input ``value``."""
    spec: dict[str, Any] = {
        "w": keys.workflow_running(workflow, queue),
        "h": keys.limit_waiting(workflow, queue),
        "i": keys.limits_held_index(queue),
        "q": keys.queue_ready(queue),
        "s": keys.queue_scheduled(queue),
        "c": [],
    }
    for index, c in enumerate(flow.concurrency):
        if c.key is None:
            spec["c"].append(["", keys.limit_held(workflow, queue=queue), c.limit])
        else:
            part = key_value(c.key, value, f"workflow {workflow!r} Concurrency(limit={c.limit})")
            spec["c"].append([keys.limit_units(workflow, index, part, queue), keys.limit_held(workflow, index, part, queue), c.limit])
    r = flow.rate_limit
    if r is not None:
        rate_part = None if r.key is None else key_value(r.key, value, f"workflow {workflow!r} RateLimit(limit={r.limit})")
        window = keys.rate_window(workflow, rate_part, queue)
        spec["r"] = [window, window + ":next", r.limit, r.period_ms]
    return codec.dumps(spec)


def _is_key(value: Any, scope: str) -> bool:
    return isinstance(value, str) and value.startswith(scope)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def parse_limits(raw: str | None, scope: str) -> dict[str, Any] | None:
    """A run's ``limitsJson`` read back (``None`` when it has none); the same
    checks as ``limits_of`` in limits.lua, so that a field the scripts ignore
    fails its run here with :class:`CorruptDataError`. ``scope``: what every
    key of the run's queue starts with (``Keys.scope``)."""
    if raw is None or raw == "":
        return None
    spec = codec.loads(raw, what="limitsJson")

    def ok() -> bool:
        if not isinstance(spec, dict) or not all(_is_key(spec.get(name), scope) for name in "whiqs"):
            return False
        entries, rate = spec.get("c"), spec.get("r")
        if not isinstance(entries, list) or not all(
            isinstance(e, list) and len(e) >= 3 and (e[0] == "" or _is_key(e[0], scope)) and _is_key(e[1], scope) and _is_count(e[2])
            for e in entries
        ):
            return False
        return rate is None or (
            isinstance(rate, list) and len(rate) >= 4 and _is_key(rate[0], scope) and _is_key(rate[1], scope)
            and _is_count(rate[2]) and _is_count(rate[3])
        )  # fmt: skip

    if not ok():
        raise CorruptDataError(f"limitsJson is not a limits record of this queue: {raw[:120]!r}")
    return dict(spec)


def check_priority(priority: Any) -> int:
    """A run's priority: an int from 0 (the default, plain FIFO) to 9 (first)."""
    if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= MAX_PRIORITY:
        raise RedflowError(f"priority must be an int from 0 to {MAX_PRIORITY}, got {priority!r}")
    return priority


def flow_summary(raw: str | None) -> Mapping[str, Any] | None:
    """A workflow's stored limits summary (see :meth:`FlowControl.summary`), or None."""
    summary = codec.try_loads(raw)
    return summary if isinstance(summary, dict) else None
