"""The worker registry, read: ``redflow-gevent workers``, the dashboard's Workers section and the metrics.

Each worker rewrites its record every few seconds (see
:mod:`redflow.engine.heartbeat`). A record whose last beat is older than
three beats belongs to a worker that is *lost* (killed, or stuck without
yielding); it stays listed until its record expires, five minutes after
that last beat. A graceful stop deletes the record at once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from redflow.client import RedflowClient
from redflow.core.errors import CorruptDataError
from redflow.core.models import WorkerRecord

STATES = ("alive", "stopping", "lost")


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerView:
    """A worker record and what it means now: ``state`` is alive, stopping or lost."""

    record: WorkerRecord
    state: str
    seen_s_ago: float


def list_workers(client: RedflowClient) -> list[WorkerView]:
    """Every worker with a record, by host and pid; records that do not parse are skipped."""
    keys = client.keys
    ids = client.redis.zrange(keys.workers(), 0, -1)
    if not ids:
        return []
    pipe = client.redis.pipeline(transaction=False)
    for worker_id in ids:
        pipe.get(keys.worker(worker_id))
    now_s = client.now_ms() / 1000.0
    views = []
    for raw in pipe.execute():
        if raw is None:  # expired or said goodbye since the index was read
            continue
        try:
            record = WorkerRecord.from_json(raw)
        except CorruptDataError:
            continue
        views.append(WorkerView(record, record.state(now_s), max(0.0, now_s - record.seen_at)))
    return sorted(views, key=lambda v: (v.record.host, v.record.pid, v.record.id))


def totals(views: list[WorkerView]) -> dict[str, int]:
    """Workers per state, and the slots (busy and all) of the live ones."""
    live = [v.record for v in views if v.state != "lost"]
    counts = {state: sum(1 for v in views if v.state == state) for state in STATES}
    return {**counts, "slots": sum(r.slots for r in live), "busy": sum(r.busy for r in live)}


def as_json(view: WorkerView) -> dict[str, Any]:
    """A worker for ``--json``: the record's fields, its state and how long ago it beat."""
    record = dataclasses.asdict(view.record)
    record["running"] = [{"run_id": run_id, "workflow": workflow} for run_id, workflow in view.record.running]
    return {**record, "state": view.state, "seen_s_ago": round(view.seen_s_ago, 3)}
