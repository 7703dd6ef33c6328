"""A run as stored: the fields of its hash (and of a workflow's metadata and a
trigger's definition), and :class:`Run` as Python reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redflow.core import codec
from redflow.core.blobs import blob_field_of, resolve
from redflow.core.clock import ms_to_s
from redflow.core.errors import CorruptDataError
from redflow.core.keys import RUN_STATUSES, TERMINAL_STATUSES
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
    # deadlines (redflow-gevent extension; see redflow/core/deadlines.py): absolute
    # times in Redis ms, and the durations a manual retry counts again from
    START_BY = "startBy"
    START_WITHIN_MS = "startWithinMs"
    DEADLINE_AT = "deadlineAt"
    TIMEOUT_MS = "timeoutMs"
    #: Which deadline ended the run (``start`` | ``timeout``), written as it is failed for it.
    DEADLINE_EXCEEDED = "deadlineExceeded"
    # singleton and debounce (redflow-gevent extension; see redflow/core/singleton.py)
    #: The Redis key of its singleton key (it holds the run's id while the run is unfinished), and on_conflict.
    SINGLETON_KEY = "singletonKey"
    SINGLETON = "singleton"
    #: The Redis key of its debounce window (it names the run while the run is still scheduled),
    #: and the policy as ``<period ms>:<max wait ms or "">``.
    DEBOUNCE_KEY = "debounceKey"
    DEBOUNCE = "debounce"
    #: How many client.run calls found the run holding its singleton key (skipped), or collapsed into it.
    SKIPPED_CALLS = "skippedCalls"
    COLLAPSED_CALLS = "collapsedCalls"


#: The run fields that hold payloads, which may be ``@blob:`` references (core/blobs.py).
PAYLOAD_FIELDS = (RunField.INPUT_JSON, RunField.OUTPUT_JSON, RunField.ERROR_JSON, RunField.PROGRESS_JSON)


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
    #: the input's JSON Schema (the asyncio package's field; ``core/input_schema.py``)
    INPUT_SCHEMA_JSON = "inputSchemaJson"
    #: how a client without the code may check input against it: strict, lax (redflow-gevent extension)
    INPUT_SCHEMA_CHECK = "inputSchemaCheck"
    #: its retry policy when not the default (``RetryPolicy.summary``), for the views
    RETRY_JSON = "retryJson"
    #: its deadlines in ms, which a client enqueueing it by name applies too
    START_WITHIN_MS = "startWithinMs"
    TIMEOUT_MS = "timeoutMs"
    #: its singleton or debounce (``core/singleton.py``'s ``metadata_json``), which a client enqueueing it by name applies
    ONE_RUN_JSON = "oneRunJson"
    #: the app name of the worker that synced it (the asyncio package's, 0.0.8 and later):
    #: its ``queue`` is scoped by it (``shop:default``, core/app_scope.py's scope_queue)
    APP = "app"


class TriggerField:
    """Fields of a stored trigger definition (``P:cron:def`` and ``P:event:def`` values, JSON)."""

    ID = "id"
    WORKFLOW = "workflow"
    QUEUE = "queue"
    EVENT = "event"
    EXPRESSION = "expression"
    TIMEZONE = "timezone"
    INPUT_JSON = "inputJson"


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
    #: Deadlines (unix seconds): the latest first start (``start_within``) and the end of its ``timeout``.
    start_by: float | None = None
    deadline_at: float | None = None
    #: ``start`` or ``timeout`` when it ended failed by that deadline.
    deadline_exceeded: str | None = None
    #: Its singleton's on_conflict, or its debounce as ``<period ms>:<max wait ms>``; calls skipped or collapsed into it.
    singleton: str | None = None
    debounce: str | None = None
    skipped_calls: int = 0
    collapsed_calls: int = 0

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def next_retry_at(self) -> float | None:
        """When its next attempt is due, while a failed attempt's retry is scheduled."""
        retrying = self.status == "scheduled" and not self.parked_for and self.attempt > 0 and self.error is not None
        return self.available_at if retrying else None

    @classmethod
    def from_hash(cls, run_id: str, fields: Mapping[str, str], *, blobs: Mapping[str, str | None] | None = None) -> Run:
        """Parse a run hash; :class:`CorruptDataError` naming the field if it is not valid.
        ``blobs``: the run's blob hash fields its payloads refer to (``@blob:``
        references); a payload whose blob is missing (or not read) is :class:`Unreadable`."""
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
            return None if raw is None or raw == "" else payload(raw, blobs, run_id=run_id, field=name)

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
            start_by=ms(RunField.START_BY),
            deadline_at=ms(RunField.DEADLINE_AT),
            deadline_exceeded=fields.get(RunField.DEADLINE_EXCEEDED) or None,
            singleton=fields.get(RunField.SINGLETON) or None,
            debounce=fields.get(RunField.DEBOUNCE) or None,
            skipped_calls=int_field(fields, RunField.SKIPPED_CALLS, what=what, default=0) or 0,
            collapsed_calls=int_field(fields, RunField.COLLAPSED_CALLS, what=what, default=0) or 0,
        )


def unreadable_error(value: Unreadable) -> dict[str, Any]:
    """A stored error that does not decode, as an error record that says so."""
    return {"name": "Unreadable", "message": f"the stored error does not decode: {value.reason}", "raw": value.raw}
