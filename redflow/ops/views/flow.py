"""Flow control as operators see it: per workflow with limits, runs running /
its limit and runs held back. Shared by ``redflow-gevent queues``, the
dashboard and the metrics, so that they say the same thing.

Read from what the scripts keep: the workflow's running counter (the one the
workflow-wide limit counts, shared with the asyncio package), its set of held
runs, and the limits summary that sync stores in the workflow's metadata
(so that a process without the workflows' code can show them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from redflow.client import RedflowClient
from redflow.core.flow import flow_summary
from redflow.core.models import WorkflowField


@dataclasses.dataclass(frozen=True, slots=True)
class FlowRow:
    """One workflow with limits: ``running`` now (the workflow-wide ``limit``, if
    it has one, counts these), ``held`` back by a limit, and its ``limits`` in words."""

    workflow: str
    queue: str
    running: int
    limit: int | None
    held: int
    limits: str

    @property
    def running_text(self) -> str:
        return f"{self.running}/{self.limit}" if self.limit is not None else str(self.running)


def describe(summary: Mapping[str, Any]) -> str:
    """``{"concurrency": [...], "rate": {...}}`` in words: ``5 at once, 2 per key, 20 per 1s``."""
    parts = [f"{c.get('limit')} {'per key' if c.get('keyed') else 'at once'}" for c in summary.get("concurrency") or []]
    rate = summary.get("rate")
    if isinstance(rate, dict):
        period_s = (rate.get("periodMs") or 0) / 1000
        parts.append(f"{rate.get('limit')} per {period_s:g}s{' per key' if rate.get('keyed') else ''}")
    return ", ".join(parts)


def _count(raw: Any) -> int:
    """A counter as stored; one that is not a number (corrupt) shows as 0."""
    try:
        return max(0, int(raw or 0))
    except (TypeError, ValueError):
        return 0


def _workflow_limit(summary: Mapping[str, Any]) -> int | None:
    return next((c.get("limit") for c in summary.get("concurrency") or [] if not c.get("keyed")), None)


def flow_rows(client: RedflowClient, workflows: Iterable[str] | None = None) -> list[FlowRow]:
    """The workflows (default: every synced one) that have limits, by name; two round trips."""
    keys, redis = client.keys, client.redis
    names = sorted(workflows) if workflows is not None else sorted(redis.smembers(keys.workflows()))
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.hmget(keys.workflow(name), [WorkflowField.QUEUE, WorkflowField.LIMITS_JSON])
    limited = []
    for name, (queue, raw) in zip(names, pipe.execute()):
        summary = flow_summary(raw)
        if summary is not None:
            limited.append((name, queue or "default", summary))
    if not limited:
        return []
    pipe = redis.pipeline(transaction=False)
    for name, queue, _ in limited:
        pipe.get(keys.workflow_running(name, queue))
        pipe.scard(keys.limit_waiting(name, queue))
    counts = pipe.execute()
    return [
        FlowRow(name, queue, _count(counts[2 * i]), _workflow_limit(summary), counts[2 * i + 1], describe(summary))
        for i, (name, queue, summary) in enumerate(limited)
    ]
