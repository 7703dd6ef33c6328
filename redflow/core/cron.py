"""Cron expressions and trigger ids.

Expressions are evaluated with croniter in the trigger's timezone (UTC when
none is given). A 6-field expression has seconds first, as the TypeScript
client (croner) reads it. Trigger ids are DATA_MODEL.md's: stable hashes of
what defines the trigger, so every worker and client computes the same id.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from redflow.core import codec
from redflow.core.errors import RedflowError

_UNIX_FIELDS = 5


class TriggerDef(Protocol):
    """What defines a cron trigger (``redflow.registry.CronTrigger``): its id is a hash of it."""

    @property
    def expression(self) -> str: ...
    @property
    def timezone(self) -> str | None: ...
    @property
    def id(self) -> str | None: ...
    @property
    def has_input(self) -> bool: ...
    @property
    def input(self) -> Any: ...
    @property
    def run_input(self) -> Any: ...


def _seconds_first(expression: str) -> bool:
    return len(expression.split()) > _UNIX_FIELDS


def _zone(name: str | None) -> Any:
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise RedflowError(f"unknown cron timezone {name!r}") from exc


def validate(expression: str, timezone: str | None = None) -> None:
    """Raise :class:`RedflowError` unless ``expression`` (and ``timezone``) can be scheduled."""
    if not isinstance(expression, str) or not croniter.is_valid(expression, second_at_beginning=_seconds_first(expression)):
        raise RedflowError(f"invalid cron expression {expression!r}")
    _zone(timezone)


def next_fire_ms(expression: str, timezone: str | None, after_ms: int) -> int:
    """The first fire time strictly after ``after_ms``, in epoch ms."""
    start = datetime.fromtimestamp(after_ms / 1000.0, _zone(timezone))
    try:
        it = croniter(expression, start, second_at_beginning=_seconds_first(expression))
        return int(round(it.get_next(float) * 1000))
    except (CroniterError, ValueError, TypeError, KeyError) as exc:  # stored definitions may be anything
        raise RedflowError(f"invalid cron expression {expression!r}: {exc}") from exc


def _digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(codec.dumps(obj).encode()).hexdigest()[:24]


def cron_trigger_id(workflow: str, trigger: TriggerDef) -> str:
    """``cron_user_<h>`` for a declared id, else ``cron_auto_<h>`` of what defines it."""
    if trigger.id:
        return "cron_user_" + _digest({"workflowName": workflow, "userId": trigger.id})
    obj: dict[str, Any] = {"workflowName": workflow, "expression": trigger.expression, "timezone": trigger.timezone}
    if trigger.has_input:
        obj["input"] = trigger.input
    return "cron_auto_" + _digest(obj)


def event_trigger_id(workflow: str, event: str) -> str:
    """``event_auto_<h>``: the id of one workflow's subscription to one event."""
    return "event_auto_" + _digest({"workflowName": workflow, "eventName": event})
