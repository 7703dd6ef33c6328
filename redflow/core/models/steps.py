"""A run's steps as stored: step records, the durable wait a step is parked in,
the entries of an event's waiter index and of the scheduled events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redflow.core import codec
from redflow.core.clock import ms_to_s
from redflow.core.errors import CorruptDataError
from redflow.core.models.runs import Unreadable, decoded, payload, unreadable_error
from redflow.core.step_arrays import ArrayStep, finished_array, parse_step_array, running_array


class StepField:
    """Fields of a step record (``P:run:<id>:steps`` values, JSON)."""

    STATUS = "status"
    SEQ = "seq"
    STARTED_AT = "startedAt"
    FINISHED_AT = "finishedAt"
    OUTPUT_JSON = "outputJson"
    ERROR_JSON = "errorJson"
    #: The attempt that wrote it (a redflow-gevent extension).
    ATTEMPT = "attempt"
    #: A durable wait's (a redflow-gevent extension): see :class:`Wait`.
    WAIT = "wait"
    #: A step run with a retry policy: which try of this attempt wrote it (a redflow-gevent extension).
    TRIES = "tries"


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
    #: Of a step run with ``retry=``: the try that wrote the record (1 for the first).
    tries: int | None = None

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
            tries=_positive_int(record.get("tries")),
        )


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
    on); its event and input waits have no counterpart here and are left out,
    and a wait of ours (an array record our worker wrote) is kept."""
    record: dict[str, Any] = {"status": step.status, "seq": step.seq, "attempt": step.attempt}
    optional = {"startedAt": step.started_at, "outputJson": step.output, "errorJson": step.error, "childRunId": step.child_run_id}
    record.update({key: value for key, value in optional.items() if value is not None})
    ours = step.wait if step.wait is not None and "correlationKey" not in step.wait and step.wait.get("kind") in _WAIT_KINDS else None
    if ours is not None:
        record["wait"] = ours
    elif step.wait_until_at is not None:
        record["wait"] = {"kind": WAIT_SLEEP, "wakeAt": step.wait_until_at}
    return record


def step_seq(record: Any) -> int | None:
    """The ``seq`` of a decoded step record, if it has a sane one."""
    return _positive_int(record.get("seq") if isinstance(record, dict) else None)


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def step_running_json(seq: int, started_at_ms: int) -> str:
    return codec.dumps({"status": STEP_RUNNING, "seq": seq, "startedAt": started_at_ms})


def step_succeeded_json(
    seq: int, started_at_ms: int, finished_at_ms: int, output_json: str, attempt: int | None = None, tries: int = 0
) -> str:
    """A succeeded step; ``attempt`` and ``tries`` (extensions other clients ignore) mark
    which attempt ran it and, for a step with a retry policy, which try (0: none)."""
    return _step_ended_json(STEP_SUCCEEDED, seq, started_at_ms, finished_at_ms, ("outputJson", output_json), attempt, tries)


def step_succeeded_around(seq: int, started_at_ms: int, finished_at_ms: int, attempt: int | None = None) -> tuple[str, str]:
    """A succeeded step's record cut where its ``outputJson`` value goes: the text
    before and after it. A script puts a payload there, as a JSON string, when the
    payload comes from Redis (store/lua/take_signal.lua: a signal)."""
    record = step_succeeded_json(seq, started_at_ms, finished_at_ms, "", attempt)
    cut = record.index('"outputJson":""') + len('"outputJson":')
    return record[:cut], record[cut + 2 :]


def step_failed_json(seq: int, started_at_ms: int, finished_at_ms: int, error_json: str, attempt: int | None = None, tries: int = 0) -> str:
    return _step_ended_json(STEP_FAILED, seq, started_at_ms, finished_at_ms, ("errorJson", error_json), attempt, tries)


def _step_ended_json(
    status: str, seq: int, started_at_ms: int, finished_at_ms: int, result: tuple[str, str], attempt: int | None, tries: int
) -> str:
    record: dict[str, Any] = {"status": status, "seq": seq, "startedAt": started_at_ms, "finishedAt": finished_at_ms, result[0]: result[1]}
    if attempt is not None:
        record["attempt"] = attempt
    if tries:
        record["tries"] = tries
    return codec.dumps(record)


# -- durable waits (redflow-gevent extensions) ------------------------------

WAIT_SLEEP = "sleep"
WAIT_EVENT = "event"
WAIT_CHILDREN = "children"
WAIT_SIGNAL = "signal"
_WAIT_KINDS = (WAIT_SLEEP, WAIT_EVENT, WAIT_CHILDREN, WAIT_SIGNAL)


@dataclass(frozen=True, slots=True)
class Wait:
    """What a step parked in a durable wait waits for, kept in its ``running``
    step record under ``wait`` (so the wait replays): a sleep's wake time, an
    event with its match and timeout, the ids of child runs, or a signal's
    name with its timeout. Times in ms."""

    kind: str
    wake_at_ms: int | None = None
    event: str | None = None
    match: dict[str, Any] | None = None
    timeout_at_ms: int | None = None
    children: tuple[str, ...] = ()
    signal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.kind == WAIT_SLEEP:
            return {"kind": self.kind, "wakeAt": self.wake_at_ms}
        if self.kind == WAIT_EVENT:
            return {"kind": self.kind, "event": self.event, "match": self.match, "timeoutAt": self.timeout_at_ms}
        if self.kind == WAIT_SIGNAL:
            return {"kind": self.kind, "signal": self.signal, "timeoutAt": self.timeout_at_ms}
        return {"kind": self.kind, "children": list(self.children)}

    @classmethod
    def of_record(cls, record: Any) -> Wait | None:
        """The wait of a decoded step record, if it is a ``running`` record of one that can be read."""
        wait = record.get("wait") if isinstance(record, dict) and record.get("status") == STEP_RUNNING else None
        if not isinstance(wait, dict) or wait.get("kind") not in _WAIT_KINDS:
            return None
        children = wait.get("children")
        match = wait.get("match")
        return cls(
            kind=wait["kind"],
            wake_at_ms=_int_or_none(wait.get("wakeAt")),
            event=wait.get("event") if isinstance(wait.get("event"), str) else None,
            match=match if isinstance(match, dict) else None,
            timeout_at_ms=_int_or_none(wait.get("timeoutAt")),
            children=tuple(c for c in children if isinstance(c, str)) if isinstance(children, list) else (),
            signal=wait.get("signal") if isinstance(wait.get("signal"), str) else None,
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def step_waiting_json(seq: int, started_at_ms: int, wait: Wait) -> str:
    """The ``running`` record of a step parked in ``wait``."""
    return codec.dumps({"status": STEP_RUNNING, "seq": seq, "startedAt": started_at_ms, "wait": wait.to_dict()})


class StepForm:
    """How a worker writes its step records: DATA_MODEL.md's objects (the
    default), or the asyncio package's arrays (:data:`ARRAY_RECORDS`, with
    ``compat="redflow-0.1"``, so that a 0.1.x worker can take a run over).
    Either form is read back by every reader here (:func:`step_record`)."""

    name = "object"

    def running(self, seq: int, attempt: int, started_at_ms: int) -> str:
        """A step in progress (the lease keeper's marker)."""
        return step_running_json(seq, started_at_ms)

    def succeeded(self, seq: int, attempt: int | None, started_at_ms: int, finished_at_ms: int, output_json: str, tries: int = 0) -> str:
        """A step's success; ``tries``: which try of a step with a retry policy wrote it (0: none)."""
        return step_succeeded_json(seq, started_at_ms, finished_at_ms, output_json, attempt, tries)

    def failed(self, seq: int, attempt: int | None, started_at_ms: int, finished_at_ms: int, error_json: str, tries: int = 0) -> str:
        return step_failed_json(seq, started_at_ms, finished_at_ms, error_json, attempt, tries)

    def waiting(self, seq: int, attempt: int, started_at_ms: int, wait: Wait) -> str:
        """A step parked in a durable wait."""
        return step_waiting_json(seq, started_at_ms, wait)

    def succeeded_around(self, seq: int, attempt: int, started_at_ms: int, finished_at_ms: int) -> tuple[str, str]:
        """A succeeded record cut where its output goes (a script puts a JSON string there)."""
        return step_succeeded_around(seq, started_at_ms, finished_at_ms, attempt)


class _ArrayForm(StepForm):
    """Step records as the asyncio package (0.0.25 and later) writes them (core/step_arrays.py)."""

    name = "array"

    def running(self, seq: int, attempt: int, started_at_ms: int) -> str:
        return running_array(seq, attempt, started_at_ms)

    def succeeded(self, seq: int, attempt: int | None, started_at_ms: int, finished_at_ms: int, output_json: str, tries: int = 0) -> str:
        return finished_array(STEP_SUCCEEDED, seq, attempt or 1, output_json)  # (its times and tries have no slot)

    def failed(self, seq: int, attempt: int | None, started_at_ms: int, finished_at_ms: int, error_json: str, tries: int = 0) -> str:
        return finished_array(STEP_FAILED, seq, attempt or 1, error_json)

    def waiting(self, seq: int, attempt: int, started_at_ms: int, wait: Wait) -> str:
        if wait.kind == WAIT_SLEEP:  # the asyncio package's own sleep (wait_for): its wake time, in its slot
            return running_array(seq, attempt, started_at_ms, wake_at_ms=wait.wake_at_ms)
        return running_array(seq, attempt, started_at_ms, wait=wait.to_dict())

    def succeeded_around(self, seq: int, attempt: int, started_at_ms: int, finished_at_ms: int) -> tuple[str, str]:
        before, after = finished_array(STEP_SUCCEEDED, seq, attempt, "").split('""')
        return before, after


OBJECT_RECORDS = StepForm()
ARRAY_RECORDS = _ArrayForm()


def form_of(record: str) -> StepForm:
    """The form a stored record is in: a record that replaces it keeps it."""
    return ARRAY_RECORDS if record.startswith("[") else OBJECT_RECORDS


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

    def resolved(self, payload_json: str, now_ms: int) -> str | None:
        """The succeeded record that replaces the waiting one (the payload is the
        step's output), in the waiting record's form; None if it cannot be read."""
        record = step_record(self.record, "a waiting step record")
        seq = step_seq(record)
        started_at_ms = record.get("startedAt") if isinstance(record, dict) else None
        if seq is None or not isinstance(record, dict) or not isinstance(started_at_ms, int):
            return None
        attempt = _positive_int(record.get("attempt"))
        return form_of(self.record).succeeded(seq, attempt, started_at_ms, now_ms, payload_json)

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
