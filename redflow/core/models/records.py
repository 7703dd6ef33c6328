"""The other records redflow stores: a workflow's retention, its cron and event
triggers, and the worker records the heartbeat writes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from redflow.core import codec
from redflow.core.clock import ms_to_s, s_to_ms
from redflow.core.cron import TriggerDef
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.models.runs import TriggerField
from redflow.core.retention import FINISHED_STATUSES, Retention

# -- retention -------------------------------------------------------------

_RETENTION_MS_FIELDS = {status: f"{status}Ms" for status in FINISHED_STATUSES}


def retention_json(retention: Retention) -> str:
    """The ``retentionJson`` field of a workflow's metadata: milliseconds per
    terminal status (null: forever) and ``maxFinished`` (null: no cap)."""
    record: dict[str, int | None] = {field: retention.keep_ms(status) for status, field in _RETENTION_MS_FIELDS.items()}
    record["maxFinished"] = retention.max_finished
    return codec.dumps(record)


def retention_from_json(raw: str | None) -> Retention | None:
    """The retention a ``retentionJson`` field names; None when absent or
    unreadable (the reader then applies its default)."""
    record = codec.try_loads(raw)
    if not isinstance(record, dict):
        return None
    try:
        seconds = {status: _ms_to_seconds(record.get(field)) for status, field in _RETENTION_MS_FIELDS.items()}
        return Retention(**seconds, max_finished=record.get("maxFinished"))
    except (RedflowError, TypeError):
        return None


def _ms_to_seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number of ms: {value!r}")
    return value / 1000.0


# -- trigger definitions ---------------------------------------------------


def cron_def_json(cron_id: str, workflow: str, queue: str, expression: str, timezone: str | None, input_json: str) -> str:
    return codec.dumps(
        {"id": cron_id, "workflow": workflow, "queue": queue, "expression": expression, "timezone": timezone, "inputJson": input_json}
    )


def cron_triggers_json(triggers: Iterable[TriggerDef]) -> str:
    """A workflow's ``cronJson``: its cron triggers as declared."""
    declared = []
    for trigger in triggers:
        out: dict[str, Any] = {TriggerField.EXPRESSION: trigger.expression, TriggerField.TIMEZONE: trigger.timezone}
        if trigger.id:
            out[TriggerField.ID] = trigger.id
        if trigger.has_input:
            out["input"] = trigger.input
        declared.append(out)
    return codec.dumps(declared)


def event_triggers_json(events: Iterable[str]) -> str:
    """A workflow's ``eventJson``: the events it subscribes to."""
    return codec.dumps([{"name": event} for event in events])


def event_def_json(event_id: str, event: str, workflow: str, queue: str) -> str:
    return codec.dumps({"id": event_id, "event": event, "workflow": workflow, "queue": queue})


def _definition(raw: str, what: str, required: tuple[str, ...]) -> dict[str, Any]:
    """A stored trigger definition: a JSON object with ``required`` string fields."""
    record = codec.loads(raw, what=what)
    if not isinstance(record, dict):
        raise CorruptDataError(f"{what} is not a JSON object: {raw[:80]!r}")
    missing = [name for name in required if not isinstance(record.get(name), str) or not record[name]]
    if missing:
        raise CorruptDataError(f"{what} lacks {', '.join(missing)}: {raw[:80]!r}")
    return record


@dataclass(frozen=True, slots=True)
class CronDef:
    """A stored cron definition (``P:cron:def`` value)."""

    id: str
    workflow: str
    queue: str
    expression: str
    timezone: str | None
    input_json: str

    @classmethod
    def from_json(cls, raw: str) -> CronDef:
        record = _definition(raw, "cron definition", ("id", "workflow", "expression"))
        return cls(
            id=record["id"],
            workflow=record["workflow"],
            queue=str(record.get("queue") or "default"),
            expression=record["expression"],
            timezone=record.get("timezone") or None,
            input_json=str(record.get("inputJson") or "null"),
        )


@dataclass(frozen=True, slots=True)
class EventDef:
    """A stored event subscription (``P:event:def`` value)."""

    id: str
    event: str
    workflow: str
    queue: str

    @classmethod
    def from_json(cls, raw: str) -> EventDef:
        record = _definition(raw, "event definition", ("id", "event", "workflow"))
        return cls(id=record["id"], event=record["event"], workflow=record["workflow"], queue=str(record.get("queue") or "default"))


# -- worker heartbeats (a redflow-gevent extension) --------------------------

#: At most this many runs in flight are named in a worker's record.
RUNNING_NAMED = 20
#: A worker whose last beat is older than this many beats (plus a second of
#: slack) is shown as lost: it went without a goodbye, or it is stuck.
LOST_AFTER_BEATS = 3


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """What a worker publishes about itself every beat (``P:worker:<id>``).

    Times are unix seconds here, integer ms in the stored JSON (Redis's clock)."""

    id: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...]
    slots: int
    busy: int
    done: int  # runs this worker ended (succeeded, failed or canceled)
    failed: int
    started_at: float
    seen_at: float  # its last beat
    beat_s: float  # how often it beats
    stopping: bool  # a graceful stop is under way
    running: tuple[tuple[str, str], ...]  # (run id, workflow) of runs in flight, at most RUNNING_NAMED

    def state(self, now_s: float) -> str:
        """``alive``, ``stopping`` (a graceful stop is draining it) or ``lost``."""
        if now_s - self.seen_at > LOST_AFTER_BEATS * self.beat_s + 1.0:
            return "lost"
        return "stopping" if self.stopping else "alive"

    def to_json(self) -> str:
        return codec.dumps(
            {
                "id": self.id, "host": self.host, "pid": self.pid, "version": self.version, "queues": list(self.queues),
                "slots": self.slots, "busy": self.busy, "done": self.done, "failed": self.failed,
                "startedAt": s_to_ms(self.started_at), "seenAt": s_to_ms(self.seen_at), "beatMs": s_to_ms(self.beat_s),
                "stopping": self.stopping, "running": [{"runId": run_id, "workflow": wf} for run_id, wf in self.running],
            }
        )  # fmt: skip

    @classmethod
    def from_json(cls, raw: str) -> WorkerRecord:
        """Parse a stored record; :class:`CorruptDataError` when it is not one."""
        record = codec.loads(raw, what="worker record")
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise CorruptDataError(f"worker record is not a JSON object with an id: {raw[:80]!r}")
        try:
            running = tuple((str(r["runId"]), str(r.get("workflow", ""))) for r in record.get("running") or ())
            return cls(
                id=record["id"], host=str(record.get("host", "")), pid=int(record.get("pid", 0)),
                version=str(record.get("version", "")), queues=tuple(str(q) for q in record.get("queues") or ()),
                slots=int(record.get("slots", 0)), busy=int(record.get("busy", 0)), done=int(record.get("done", 0)),
                failed=int(record.get("failed", 0)), started_at=ms_to_s(int(record["startedAt"])) or 0.0,
                seen_at=ms_to_s(int(record["seenAt"])) or 0.0, beat_s=int(record.get("beatMs", 0)) / 1000.0,
                stopping=bool(record.get("stopping")), running=running,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptDataError(f"worker record {record['id']!r} is not valid: {exc}") from None
