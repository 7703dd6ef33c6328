"""Run and Step as Python sees them, and the Redis field names behind them.

This is the only Python module that spells the camelCase field names of
DATA_MODEL.md (the Lua scripts spell them too, inside Redis). Stored times
are integer ms; the objects here carry float unix seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redflow.core import codec
from redflow.core.blobs import blob_field_of, resolve
from redflow.core.clock import ms_to_s, s_to_ms
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.keys import RUN_STATUSES, TERMINAL_STATUSES
from redflow.core.retention import FINISHED_STATUSES, Retention
from redflow.core.step_arrays import ArrayStep, parse_step_array
from redflow.core.tags import tags_of


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored payload (input, output, error, step record) that does not decode:
    not JSON, or nested deeper than the decoder goes (1,024 levels).

    It stands in for the value so that one bad run fails neither a listing nor
    its own page; ``raw`` is the stored text, ``reason`` the decoder's word.
    """

    raw: str
    reason: str


def decoded(raw: str, what: str) -> Any:
    """The JSON value of ``raw``, or :class:`Unreadable` when it does not decode."""
    try:
        return codec.loads(raw, what=what)
    except CorruptDataError as exc:
        return Unreadable(raw, str(exc.__cause__ or exc))


class RunField:
    """Fields of the run hash ``P:run:<id>``."""

    WORKFLOW = "workflow"
    QUEUE = "queue"
    STATUS = "status"
    INPUT_JSON = "inputJson"
    ATTEMPT = "attempt"
    MAX_ATTEMPTS = "maxAttempts"
    CREATED_AT = "createdAt"
    AVAILABLE_AT = "availableAt"
    STARTED_AT = "startedAt"
    FINISHED_AT = "finishedAt"
    OUTPUT_JSON = "outputJson"
    ERROR_JSON = "errorJson"
    CANCEL_REQUESTED_AT = "cancelRequestedAt"
    CANCEL_REASON = "cancelReason"
    PARENT_RUN_ID = "parentRunId"
    # redflow-gevent extensions (issue 18): other clients ignore them
    TAGS_JSON = "tagsJson"
    TRACEPARENT = "traceparent"
    TRACESTATE = "tracestate"
    # flow control (redflow-gevent extension; see redflow/core/flow.py)
    PRIORITY = "priority"
    LIMITS_JSON = "limitsJson"
    HELD_BY = "heldBy"
    # redflow-gevent extensions (other clients ignore them)
    #: A run parked by a durable wait (``scheduled``): what it waits for
    #: (sleep | event | children) and in which step; cleared when it resumes.
    PARKED_FOR = "parkedFor"
    PARKED_STEP = "parkedStep"
    #: Children of a parked ``run_workflows`` that had not ended when it parked.
    AWAITING_CHILDREN = "awaitingChildren"
    #: On a ``run_workflows`` child: its parent's queue (whoever ends it reports that to the parent).
    NOTIFY_PARENT = "notifyParent"
    #: ``ctx.progress(value)``: the latest value, JSON.
    PROGRESS_JSON = "progressJson"


class WorkflowField:
    """Fields of the workflow metadata hash ``P:workflow:<name>``."""

    NAME = "name"
    QUEUE = "queue"
    MAX_ATTEMPTS = "maxAttempts"
    UPDATED_AT = "updatedAt"
    CRON_JSON = "cronJson"
    CRON_IDS_JSON = "cronIdsJson"
    EVENT_JSON = "eventJson"
    EVENT_IDS_JSON = "eventIdsJson"
    #: redflow-gevent extension: the workflow's retention (:func:`retention_json`).
    RETENTION_JSON = "retentionJson"
    #: the workflow-wide concurrency limit (the asyncio package's field)
    MAX_CONCURRENCY = "maxConcurrency"
    #: what views show of its limits (redflow-gevent extension)
    LIMITS_JSON = "limitsJson"


def int_field(fields: Mapping[str, str], name: str, *, what: str, default: int | None = None) -> int | None:
    """An integer field; empty or absent gives ``default``; anything else not an int is corrupt."""
    raw = fields.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        try:
            as_float = float(raw)
        except (TypeError, ValueError):
            raise CorruptDataError(f"{what}: field {name!r} is not an integer: {raw!r}") from None
        if as_float != as_float or as_float in (float("inf"), float("-inf")):
            raise CorruptDataError(f"{what}: field {name!r} is not finite: {raw!r}") from None
        return int(as_float)


def max_attempts_of(fields: Mapping[str, str], *, what: str) -> int:
    """``maxAttempts`` of a run hash; a missing field means 1 (as the seed worker reads it)."""
    return max(1, int_field(fields, RunField.MAX_ATTEMPTS, what=what, default=1) or 1)


@dataclass(frozen=True, slots=True)
class Run:
    """A run as read from ``P:run:<id>``."""

    id: str
    workflow: str
    queue: str
    status: str
    input: Any
    output: Any
    error: dict[str, Any] | None
    attempt: int
    max_attempts: int
    created_at: float | None
    available_at: float | None
    started_at: float | None
    finished_at: float | None
    cancel_requested_at: float | None
    cancel_reason: str | None
    parent_run_id: str | None
    tags: dict[str, str] = field(default_factory=dict)
    progress: Any = None
    #: While parked in a durable wait: ``sleep``, ``event`` or ``children``, and the step's name.
    parked_for: str | None = None
    parked_step: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_hash(cls, run_id: str, fields: Mapping[str, str]) -> Run:
        """Parse a run hash; :class:`CorruptDataError` naming the field if it is not valid."""
        what = f"run {run_id}"
        status = fields.get(RunField.STATUS, "")
        if status not in RUN_STATUSES:
            raise CorruptDataError(f"{what}: unknown status {status!r}")
        workflow = fields.get(RunField.WORKFLOW, "")
        if not workflow:
            raise CorruptDataError(f"{what}: no workflow name")

        def ms(name: str) -> float | None:
            value = int_field(fields, name, what=what)
            return None if value is None or value <= 0 else ms_to_s(value)

        def json_field(name: str) -> Any:
            raw = fields.get(name)
            return None if raw is None or raw == "" else decoded(raw, f"{what} {name}")

        error = json_field(RunField.ERROR_JSON)
        if isinstance(error, Unreadable):
            error = unreadable_error(error)
        return cls(
            id=run_id,
            workflow=workflow,
            queue=fields.get(RunField.QUEUE, "") or "default",
            status=status,
            input=json_field(RunField.INPUT_JSON),
            output=json_field(RunField.OUTPUT_JSON),
            error=error if isinstance(error, dict) or error is None else {"message": str(error)},
            attempt=int_field(fields, RunField.ATTEMPT, what=what, default=0) or 0,
            max_attempts=max_attempts_of(fields, what=what),
            created_at=ms(RunField.CREATED_AT),
            available_at=ms(RunField.AVAILABLE_AT),
            started_at=ms(RunField.STARTED_AT),
            finished_at=ms(RunField.FINISHED_AT),
            cancel_requested_at=ms(RunField.CANCEL_REQUESTED_AT),
            cancel_reason=fields.get(RunField.CANCEL_REASON) or None,
            parent_run_id=fields.get(RunField.PARENT_RUN_ID) or None,
            tags=dict(tags_of(fields.get(RunField.TAGS_JSON))),
            progress=json_field(RunField.PROGRESS_JSON),
            parked_for=fields.get(RunField.PARKED_FOR) or None,
            parked_step=fields.get(RunField.PARKED_STEP) or None,
        )


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


# -- steps -----------------------------------------------------------------

STEP_RUNNING = "running"
STEP_SUCCEEDED = "succeeded"
STEP_FAILED = "failed"
#: Shown for a step record that does not decode (never stored).
STEP_UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Step:
    """One durable step of a run, from ``P:run:<id>:steps``."""

    name: str
    status: str
    seq: int
    output: Any
    error: dict[str, Any] | None
    started_at: float | None
    finished_at: float | None
    #: The attempt that wrote the record (a redflow-gevent extension; ``None``
    #: from other clients). Below the run's attempt on a succeeded step: later
    #: attempts replayed it.
    attempt: int | None = None
    #: What a step parked in a durable wait waits for (its record is ``running`` meanwhile).
    wait: Wait | None = None

    @classmethod
    def from_json(cls, name: str, raw: str, *, blobs: Mapping[str, str | None] | None = None, run_id: str = "") -> Step:
        """Parse a step record, in the object form or the asyncio package's array
        form; one that does not decode is a step with status ``unreadable``.
        ``blobs``: the run's blob hash fields its payloads refer to (``@blob:``
        references, redflow/core/blobs.py); a payload whose blob is missing is
        :class:`Unreadable`, and so is any reference when ``blobs`` is None."""
        what = f"step {name!r}"
        record = step_record(raw, what)
        if isinstance(record, Unreadable):
            return cls(name=name, status=STEP_UNREADABLE, seq=0, output=record, error=None, started_at=None, finished_at=None)
        output_json = record.get("outputJson")
        error_json = record.get("errorJson")
        error = None if error_json is None else payload(error_json, blobs, run_id=run_id, field=f"{what} errorJson")
        return cls(
            name=name,
            status=str(record.get("status", "")),
            seq=step_seq(record) or 0,
            output=None if output_json is None else payload(output_json, blobs, run_id=run_id, field=f"{what} outputJson"),
            error=unreadable_error(error)
            if isinstance(error, Unreadable)
            else error
            if isinstance(error, dict) or error is None
            else {"message": str(error)},
            started_at=ms_to_s(record.get("startedAt")),
            finished_at=ms_to_s(record.get("finishedAt")),
            attempt=_positive_int(record.get("attempt")),
            wait=Wait.of_record(record),
        )


def payload(stored: str, blobs: Mapping[str, str | None] | None, *, run_id: str, field: str) -> Any:
    """The JSON value of a stored payload that may be a ``@blob:`` reference;
    :class:`Unreadable` when it does not decode or its blob is missing (or no
    ``blobs`` were read), so that one bad payload fails no listing."""
    if blob_field_of(stored) is not None:
        if blobs is None:
            return Unreadable(stored, "a reference to a blob of the run's blob hash, which was not read")
        try:
            stored = resolve(stored, blobs, run_id=run_id, field=field)
        except CorruptDataError as exc:
            return Unreadable(stored, str(exc))
    return decoded(stored, f"run {run_id} {field}" if run_id else field)


def step_record(raw: str, what: str) -> dict[str, Any] | Unreadable:
    """A stored step record as a dict of the object form (DATA_MODEL.md), whichever
    form it was written in: the asyncio package's array records (0.0.25 and
    later, redflow/core/step_arrays.py) are translated. :class:`Unreadable` when it is neither."""
    record = decoded(raw, what)
    if isinstance(record, list):
        try:
            return _object_form(parse_step_array(record, what=what))
        except CorruptDataError as exc:
            return Unreadable(raw, str(exc))
    if isinstance(record, dict):
        return record
    return record if isinstance(record, Unreadable) else Unreadable(raw, "not a JSON object or array")


def _object_form(step: ArrayStep) -> dict[str, Any]:
    """An array step record in the object form. A running record's wake time is
    our ``sleep`` wait (a run parked in the asyncio package's ``wait_for`` sleeps
    on); its event and input waits have no counterpart here and are left out."""
    record: dict[str, Any] = {"status": step.status, "seq": step.seq, "attempt": step.attempt}
    optional = {"startedAt": step.started_at, "outputJson": step.output, "errorJson": step.error, "childRunId": step.child_run_id}
    record.update({key: value for key, value in optional.items() if value is not None})
    if step.wait_until_at is not None:
        record["wait"] = {"kind": WAIT_SLEEP, "wakeAt": step.wait_until_at}
    return record


def unreadable_error(value: Unreadable) -> dict[str, Any]:
    """A stored error that does not decode, as an error record that says so."""
    return {"name": "Unreadable", "message": f"the stored error does not decode: {value.reason}", "raw": value.raw}


def step_seq(record: Any) -> int | None:
    """The ``seq`` of a decoded step record, if it has a sane one."""
    return _positive_int(record.get("seq") if isinstance(record, dict) else None)


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def step_running_json(seq: int, started_at: int) -> str:
    return codec.dumps({"status": STEP_RUNNING, "seq": seq, "startedAt": started_at})


def step_succeeded_json(seq: int, started_at: int, finished_at: int, output_json: str, attempt: int | None = None) -> str:
    """A succeeded step; ``attempt`` (an extension other clients ignore) marks which attempt ran it."""
    return _step_ended_json(STEP_SUCCEEDED, seq, started_at, finished_at, ("outputJson", output_json), attempt)


def step_failed_json(seq: int, started_at: int, finished_at: int, error_json: str, attempt: int | None = None) -> str:
    return _step_ended_json(STEP_FAILED, seq, started_at, finished_at, ("errorJson", error_json), attempt)


def _step_ended_json(status: str, seq: int, started_at: int, finished_at: int, result: tuple[str, str], attempt: int | None) -> str:
    record: dict[str, Any] = {"status": status, "seq": seq, "startedAt": started_at, "finishedAt": finished_at, result[0]: result[1]}
    if attempt is not None:
        record["attempt"] = attempt
    return codec.dumps(record)


# -- durable waits (redflow-gevent extensions) ------------------------------

WAIT_SLEEP = "sleep"
WAIT_EVENT = "event"
WAIT_CHILDREN = "children"


@dataclass(frozen=True, slots=True)
class Wait:
    """What a step parked in a durable wait waits for, kept in its ``running``
    step record under ``wait`` (so the wait replays): a sleep's wake time, an
    event with its match and timeout, or the ids of child runs. Times in ms."""

    kind: str
    wake_at: int | None = None
    event: str | None = None
    match: dict[str, Any] | None = None
    timeout_at: int | None = None
    children: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        if self.kind == WAIT_SLEEP:
            return {"kind": self.kind, "wakeAt": self.wake_at}
        if self.kind == WAIT_EVENT:
            return {"kind": self.kind, "event": self.event, "match": self.match, "timeoutAt": self.timeout_at}
        return {"kind": self.kind, "children": list(self.children)}

    @classmethod
    def of_record(cls, record: Any) -> Wait | None:
        """The wait of a decoded step record, if it is a ``running`` record of one that can be read."""
        wait = record.get("wait") if isinstance(record, dict) and record.get("status") == STEP_RUNNING else None
        if not isinstance(wait, dict) or wait.get("kind") not in (WAIT_SLEEP, WAIT_EVENT, WAIT_CHILDREN):
            return None
        children = wait.get("children")
        match = wait.get("match")
        return cls(
            kind=wait["kind"],
            wake_at=_int_or_none(wait.get("wakeAt")),
            event=wait.get("event") if isinstance(wait.get("event"), str) else None,
            match=match if isinstance(match, dict) else None,
            timeout_at=_int_or_none(wait.get("timeoutAt")),
            children=tuple(c for c in children if isinstance(c, str)) if isinstance(children, list) else (),
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def step_waiting_json(seq: int, started_at: int, wait: Wait) -> str:
    """The ``running`` record of a step parked in ``wait``."""
    return codec.dumps({"status": STEP_RUNNING, "seq": seq, "startedAt": started_at, "wait": wait.to_dict()})


@dataclass(frozen=True, slots=True)
class EventWaiter:
    """An entry of ``P:event:waiters:<event>``: where the waiting run's step is,
    what the payload must contain, the step's waiting record (a delivery only
    lands while the step still holds exactly that record) and ``since``, when
    the entry first existed by Redis's clock (ms with a microsecond fraction,
    written by ``register_waiter``; None in an entry from before it was kept)."""

    run_id: str
    queue: str
    step: str
    match: dict[str, Any]
    record: str
    since: float | None = None

    def head(self) -> str:
        """The entry's JSON up to its ``since`` (without the closing brace): what
        names the wait. ``register_waiter`` appends ``,"since":<ms>}``."""
        return codec.dumps({"queue": self.queue, "step": self.step, "match": self.match, "record": self.record})[:-1]

    def began_before(self, at_ms: float) -> bool:
        """Whether the wait's entry existed before ``at_ms`` (Redis ms); an entry without a stamp did."""
        return self.since is None or self.since < at_ms

    def resolved(self, payload_json: str, now: int) -> str | None:
        """The succeeded record that replaces the waiting one (the payload is the
        step's output); None if the waiting record cannot be read."""
        record = codec.try_loads(self.record)
        seq = step_seq(record)
        started_at = record.get("startedAt") if isinstance(record, dict) else None
        if seq is None or not isinstance(started_at, int):
            return None
        return step_succeeded_json(seq, started_at, now, payload_json)

    def accepts(self, payload: Any) -> bool:
        """Whether ``payload`` contains every top-level item of the match (JSON equality)."""
        if not self.match:
            return True
        return isinstance(payload, dict) and all(key in payload and json_equal(payload[key], value) for key, value in self.match.items())

    @classmethod
    def from_json(cls, run_id: str, raw: str) -> EventWaiter | None:
        """None for an entry that cannot be read (it is dropped, not delivered to)."""
        entry = codec.try_loads(raw)
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("queue", "step", "record")):
            return None
        match = entry.get("match")
        since = entry.get("since")
        since = since if isinstance(since, (int, float)) and not isinstance(since, bool) else None
        return cls(run_id, entry["queue"], entry["step"], match if isinstance(match, dict) else {}, entry["record"], since)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of decoded JSON values: ``true`` is not ``1`` (as Python's ``==`` has it);
    ``1`` and ``1.0`` are the same JSON number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return bool(a == b)


def scheduled_event_json(event_id: str, event: str, payload_json: str) -> str:
    """A member of ``P:events:scheduled``."""
    return codec.dumps({"id": event_id, "event": event, "payloadJson": payload_json})


def scheduled_event_of(raw: str) -> tuple[str, str] | None:
    """``(event, payloadJson)`` of a ``P:events:scheduled`` member; None if it cannot be read."""
    entry = codec.try_loads(raw)
    if not isinstance(entry, dict) or not isinstance(entry.get("event"), str) or not isinstance(entry.get("payloadJson"), str):
        return None
    return entry["event"], entry["payloadJson"]


# -- trigger definitions ---------------------------------------------------


def cron_def_json(cron_id: str, workflow: str, queue: str, expression: str, timezone: str | None, input_json: str) -> str:
    return codec.dumps(
        {"id": cron_id, "workflow": workflow, "queue": queue, "expression": expression, "timezone": timezone, "inputJson": input_json}
    )


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
