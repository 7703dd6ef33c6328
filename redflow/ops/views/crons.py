"""Stored cron triggers as the commands and the dashboard list them: each
definition with its next fire time, paused ones marked, broken ones named."""

from __future__ import annotations

import dataclasses
from typing import Any

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.core.models import CronDef


@dataclasses.dataclass(frozen=True, slots=True)
class CronEntry:
    """A stored cron definition with its next fire time; ``error`` when it cannot be read."""

    id: str
    workflow: str
    queue: str
    expression: str
    timezone: str | None
    input: Any
    next_at: float | None
    error: str | None = None
    paused_at: float | None = None  # set while paused (``cron pause``)


def cron_entries(client: RedflowClient) -> list[CronEntry]:
    """Every stored cron definition, soonest first; a broken one is listed with its error."""
    keys = client.keys
    pipe = client.redis.pipeline(transaction=False)
    pipe.hgetall(keys.cron_def())
    pipe.zrange(keys.cron_next(), 0, -1, withscores=True)
    pipe.hgetall(keys.cron_paused())
    definitions, schedule, paused = pipe.execute()
    next_ms = dict(schedule)
    entries = []
    for cron_id, raw in definitions.items():
        next_at = next_ms[cron_id] / 1000.0 if cron_id in next_ms else None
        paused_at = int(paused[cron_id]) / 1000.0 if str(paused.get(cron_id, "")).isdigit() else None
        try:
            d = CronDef.from_json(raw)
            run_input = codec.loads(d.input_json, what="cron input")
            entries.append(CronEntry(d.id, d.workflow, d.queue, d.expression, d.timezone, run_input, next_at, paused_at=paused_at))
        except RedflowError as exc:
            entries.append(CronEntry(cron_id, "?", "?", "?", None, None, next_at, error=str(exc), paused_at=paused_at))
    return sorted(entries, key=lambda e: (e.next_at is None, e.next_at or 0.0, e.id))
