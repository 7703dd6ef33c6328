"""The replies of the Lua scripts, parsed into small values by their wrappers (``store/scripts.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redflow.core.models import RunField

#: The blobs of a start that read none (shared: never changed).
_NO_BLOBS: dict[str, str | None] = {}


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2]))


@dataclass(frozen=True, slots=True)
class Enqueued:
    """``enqueue_run``: the run was created, or its idempotency key named ``run_id`` already;
    ``kind`` says which (``created``, ``existing``) or what its singleton key or debounce
    window did: ``skipped`` (the key's run is returned), ``conflict`` (a "replace" must
    cancel ``run_id`` first), ``collapsed`` (the call went into run ``run_id``)."""

    created: bool
    run_id: str
    kind: str = "created"

    @classmethod
    def parse(cls, reply: Sequence[str]) -> Enqueued:
        return cls(reply[0] == "created", reply[1], reply[0])


@dataclass(slots=True)  # made per run: not frozen, whose __init__ costs 3x
class StartReply:
    """Starting a claimed run: ``kind`` is ``started`` (with the run's
    ``fields`` as they were read, and ``steps`` when an earlier attempt may
    have stored some), ``busy`` (another attempt holds it), ``missing``,
    ``skip`` (not queued/running: ``status``), ``cancel`` (a cancel is
    pending), ``held`` (a limit holds it back: ``status`` it waits in, and
    ``detail`` the ms it is due, or "") or ``admit`` (its limits are to be
    computed: ``detail`` is its inputJson) or ``expired`` (past a deadline, not
    started: ``detail`` is ``start`` or ``timeout``, with its ``fields``).
    ``attempt`` is the attempt number the start made (of an expired run: its last);
    ``blobs`` what its input and steps refer to."""

    kind: str
    status: str = ""
    workflow: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    steps: dict[str, str] = field(default_factory=dict)
    attempt: int = 0
    detail: str = ""
    #: The run's blob hash fields its input or steps refer to (``@blob:`` references), read by the start.
    blobs: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> StartReply:
        kind = reply[0]
        if kind == "started":
            blobs = dict(zip(reply[4], reply[5])) if len(reply) > 4 else _NO_BLOBS
            return cls(kind, fields=_pairs(reply[1]), steps=_pairs(reply[2]), attempt=int(reply[3]), blobs=blobs)
        if kind == "expired":
            fields = _pairs(reply[4])
            return cls(kind, status=reply[1], workflow=reply[2] or "", fields=fields, attempt=_attempt_of(fields), detail=reply[3])
        if len(reply) > 2:
            return cls(kind, status=reply[1], workflow=reply[2] or "", detail=reply[3] if len(reply) > 3 else "")
        return cls(kind)


def _attempt_of(fields: dict[str, str]) -> int:
    """The attempt count of a run hash as read; a count that is not a number reads as 0 (the worker reports it)."""
    raw = fields.get(RunField.ATTEMPT, "")
    return int(raw) if raw.isdigit() else 0


@dataclass(slots=True)  # made per run: not frozen, whose __init__ costs 3x
class Claim:
    """A run a slot claimed and started in the same call (``take_run``, or the
    next run of a ``settle_run``)."""

    run_id: str
    start: StartReply
    left: int = 0  # ``take_run``: the entries left in ready after it


def claim_of(reply: Sequence[Any]) -> Claim | None:
    """The run a claim took and started, or None."""
    if not reply or not reply[0]:
        return None
    return Claim(reply[0], StartReply.parse(reply[1]), int(reply[2]) if len(reply) > 2 else 0)


@dataclass(slots=True)  # made per run: not frozen, whose __init__ costs 3x
class Settled:
    """``settle_run``: the status the run ended in (``scheduled`` for a retry),
    ``stale`` (another attempt owns it) or ``missing``; and the next run it
    claimed and started, if it was asked to and the queue had one."""

    status: str
    next: Claim | None = None

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> Settled:
        return cls(reply[0], claim_of(reply[1:]))


@dataclass(frozen=True, slots=True)
class RetryReply:
    """``retry_run``: ``state`` is ``queued`` (a failed/canceled run is queued
    again), ``requeued`` (an unheld running run went back to ready),
    ``not_retryable``, ``held`` (another unfinished run holds its singleton key)
    or ``missing``; ``previous`` is the status it had."""

    state: str
    previous: str

    @property
    def accepted(self) -> bool:
        return self.state in ("queued", "requeued")

    @classmethod
    def parse(cls, reply: Sequence[str]) -> RetryReply:
        return cls(reply[0], reply[1])


@dataclass(frozen=True, slots=True)
class StepSaved:
    """``save_step``: ``saved``, ``kept`` (a marker found a newer record),
    ``stale`` (this attempt does not own the run) or ``changed`` (the record
    was not the expected one: ``current`` is what it holds); and the run's
    ``cancelRequestedAt`` ("" when none). ``take_signal`` answers in the same
    shape: ``taken``, ``timeout`` or ``done`` with the step's record in
    ``current``, else ``waiting``, ``canceled`` or ``stale``. ``renewed``:
    the script read the lease and extended it (a save sent with its lease
    checked, see ``store/lua/save_step.lua``)."""

    state: str
    cancel_requested_at: str
    current: str = ""
    renewed: bool = False

    @classmethod
    def parse(cls, reply: Sequence[str]) -> StepSaved:
        if reply == _SAVED_REPLY:  # a first-time step's usual answer: one shared value, nothing made per step
            return _SAVED
        size = len(reply)
        return cls(reply[0], reply[1] or "", reply[2] if size > 2 else "", size > 3 and reply[3] == "1")


#: ``save_step``'s reply to a record written with no cancel pending and the lease not read.
_SAVED_REPLY = ["saved", "", "", ""]
_SAVED = StepSaved("saved", "")


@dataclass(frozen=True, slots=True)
class Ownership:
    """``confirm_run``: whether the attempt still owns its run, and the run's
    status and ``cancelRequestedAt`` ("" when none, or the run is gone)."""

    owned: bool
    status: str
    cancel_requested_at: str

    @property
    def canceled(self) -> bool:
        """Canceled, or asked to be: a cancel request always ends the run canceled."""
        return self.status == "canceled" or self.cancel_requested_at != ""

    @classmethod
    def parse(cls, reply: Sequence[str]) -> Ownership:
        return cls(reply[0] == "owned", reply[1] or "", reply[2] or "")


@dataclass(frozen=True, slots=True)
class SearchStep:
    """``search_runs``: the matches (id, score) newest first, where the walk
    stopped (the last entry it examined), whether it reached the end of the
    index, and how many entries it examined."""

    matches: list[tuple[str, float]]
    last: tuple[str, str] | None
    exhausted: bool
    examined: int

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> SearchStep:
        flat, last_id, last_score = reply[0], reply[1], reply[2]
        matches = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
        last = (str(last_score), str(last_id)) if last_score not in (None, "") else None
        return cls(matches, last, bool(reply[3]), int(reply[4]))


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    """A due scheduled event this worker took: ``member`` (what it removes once
    delivered), its fire time (Redis ms) and its ``P:events:scheduled`` entry."""

    member: str
    fired_at: float
    entry: str


@dataclass(frozen=True, slots=True)
class ScheduledClaim:
    """``claim_scheduled_events``: Redis's time, the score of the first entry
    left (the next fire time or claim end; None when none) and the events taken."""

    now_ms: float
    next_ms: float | None
    events: tuple[ClaimedEvent, ...]

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> ScheduledClaim:
        flat = [str(part) for part in reply]
        events = tuple(ClaimedEvent(flat[i], float(flat[i + 1]), flat[i + 2]) for i in range(2, len(flat), 3))
        return cls(float(flat[0]), float(flat[1]) if flat[1] else None, events)


# -- parsers of plain replies


def text(reply: Any) -> str:
    return str(reply)


def flag(reply: Any) -> bool:
    return bool(reply == 1)


def truthy(reply: Any) -> bool:
    return bool(reply)


def texts(reply: Any) -> list[str]:
    return [str(entry) for entry in reply]


@dataclass(frozen=True, slots=True)
class StreamAppend:
    """``append_stream``: ``written`` (with the item's ``item_id``), ``replayed``
    (its position was written before the run last parked) or ``refused`` (the
    attempt does not own the running run: ``status`` is the run's); ``replayed``
    is the last position the attempt had written when the run last parked."""

    kind: str
    item_id: str = ""
    replayed: int = 0
    status: str = ""

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> StreamAppend:
        if reply[0] == "refused":
            return cls("refused", status=reply[1])
        return cls(reply[0], reply[1], int(reply[2]))


@dataclass(frozen=True, slots=True)
class StreamPage:
    """``read_stream``: the run's ``status`` ("" when there is no run), where its
    signal stream ended (``signals_at``) and a page of ``(entry id, record)``, in order."""

    status: str
    signals_at: str = "0-0"
    entries: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> StreamPage:
        if not reply[0]:
            return cls("")
        return cls(reply[0], reply[1], tuple(zip(reply[2::2], reply[3::2])))
