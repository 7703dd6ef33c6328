"""Schedules as data: what one is made of, checked, and when its ticks are due.

A schedule (``client.schedules``, stored in Redis, changed at run time) fires
a workflow at the ticks of a cron expression in a time zone. Each tick is
due at its time plus a jitter that is a hash of the schedule id and the tick
time: the same on every worker, so a change of leader does not draw another
delay (and cannot fire the tick at two different times). A tick no leader
reached within the schedule's window of its due time (``catchup``, at least
:data:`ON_TIME_S`) is missed: it is skipped and counted, never started.

No I/O here: the store writes schedules (``store/schedules.py``) and the cron
leader fires them (``engine/schedules.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from redflow.core import cron
from redflow.core.errors import RedflowError
from redflow.core.retention import duration_s
from redflow.core.tags import MAX_VALUE_CHARS, check_text

#: What a tick does while the schedule's last run is unfinished.
OVERLAPS: Final = ("skip", "allow", "cancel_running")
#: A tick started within this many seconds of its due time is on time, whatever
#: ``catchup`` says: it covers a change of leader (the cron lock lives 2 s) and
#: a worker's restart, so that ``catchup=0`` loses no tick to them.
ON_TIME_S: Final = 10.0
#: A schedule id is at most this long (it tags the runs the schedule starts).
MAX_ID_CHARS: Final = MAX_VALUE_CHARS
#: Missed ticks counted one by one (each is a croniter step, ~0.1 ms of CPU that
#: holds the worker's greenlets); past this many, the next tick is found directly
#: and the count says "at least".
MAX_COUNTED_SKIPS: Final = 1000
#: How much longer than its schedule's window a tick's idempotency key lives:
#: while a tick can still start, its key says whether it did.
KEY_MARGIN_S: Final = 3600


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """When and how a schedule fires (its workflow and input aside)."""

    cron: str
    timezone: str | None
    overlap: str
    catchup_s: float
    jitter_s: float

    @property
    def window_ms(self) -> int:
        """How late a tick may start: ``catchup``, and never less than :data:`ON_TIME_S`."""
        return round(max(self.catchup_s, ON_TIME_S) * 1000)

    @property
    def key_ttl_s(self) -> int:
        """How long the idempotency key of a tick's run lives."""
        return int(self.window_ms / 1000) + KEY_MARGIN_S


@dataclass(frozen=True, slots=True)
class Tick:
    """One tick of a schedule: its cron time, and when it is due (time + jitter), in epoch ms."""

    tick_ms: int
    due_ms: int


def check_id(schedule_id: Any) -> str:
    """A schedule id: a non-empty string of at most :data:`MAX_ID_CHARS` characters, none a
    control character (it tags the runs the schedule starts, as a tag value is checked)."""
    return check_text(schedule_id, "a schedule id", MAX_ID_CHARS)


def check_workflow(workflow: Any) -> str:
    if not isinstance(workflow, str) or not workflow:
        raise RedflowError(f"workflow must be a workflow's name (a non-empty string), not {workflow!r}")
    return workflow


def check_spec(cron_expression: Any, timezone: Any, overlap: Any, catchup: float | timedelta, jitter: float | timedelta) -> ScheduleSpec:
    """The spec of these values, or a :class:`RedflowError` naming the first bad one."""
    if not isinstance(cron_expression, str):
        raise RedflowError(f"cron must be a cron expression (a string), not {cron_expression!r}")
    if timezone is not None and (not isinstance(timezone, str) or not timezone):
        raise RedflowError(f"timezone must be an IANA zone name such as 'Europe/Berlin' (or None for UTC), not {timezone!r}")
    cron.validate(cron_expression, timezone)
    if overlap not in OVERLAPS:
        raise RedflowError(f"overlap must be one of {', '.join(map(repr, OVERLAPS))}, not {overlap!r}")
    catchup_s = duration_s(catchup, "catchup", zero_ok=True)
    jitter_s = duration_s(jitter, "jitter", zero_ok=True)
    if catchup_s is None or jitter_s is None:
        raise RedflowError("catchup and jitter are seconds >= 0, not None")
    return ScheduleSpec(cron_expression, timezone or None, overlap, catchup_s, jitter_s)


def jitter_ms(schedule_id: str, tick_ms: int, jitter_s: float) -> int:
    """The delay of one tick, from 0 to ``jitter_s`` seconds: a hash of the schedule
    and the tick, so every worker draws the same one."""
    most_ms = round(jitter_s * 1000)
    if most_ms <= 0:
        return 0
    digest = hashlib.sha256(f"{schedule_id}\n{tick_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (most_ms + 1)


def next_tick(schedule_id: str, spec: ScheduleSpec, after_ms: int) -> Tick:
    """The first tick strictly after ``after_ms`` (croniter's, in the schedule's zone)."""
    tick_ms = cron.next_fire_ms(spec.cron, spec.timezone, after_ms)
    return Tick(tick_ms, tick_ms + jitter_ms(schedule_id, tick_ms, spec.jitter_s))


def skip_missed(schedule_id: str, spec: ScheduleSpec, tick: Tick, now_ms: int) -> tuple[int, Tick]:
    """How many ticks from ``tick`` on were missed (due more than the window before
    ``now_ms``), and the first one that was not (it may be due already)."""
    horizon_ms = now_ms - spec.window_ms
    skipped = 0
    while tick.due_ms < horizon_ms:
        skipped += 1
        if skipped >= MAX_COUNTED_SKIPS:  # a long outage of a frequent schedule: jump to the horizon
            return skipped, next_tick(schedule_id, spec, horizon_ms - 1)
        tick = next_tick(schedule_id, spec, tick.tick_ms)
    return skipped, tick
