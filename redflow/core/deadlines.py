"""A workflow's deadlines: ``start_within`` and ``timeout``, and the run fields they become.

Both are fixed on the run when it is created, as absolute times in Redis's
clock, so that any worker enforces them (a run enqueued by a client that
writes neither field has no deadline):

- ``startBy`` = when the run was due (its enqueue, or the end of its delay)
  + ``start_within``: a run not started by then never starts;
- ``deadlineAt`` = its creation + ``timeout``: the whole run (every
  attempt, sleep and wait) ends by then.

``startWithinMs`` and ``timeoutMs`` are kept too, so that a manual retry
(``retry_run.lua``) gives the run fresh deadlines, as it gives it fresh
attempts. No I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from redflow.core.errors import DeadlineExceededError, RedflowError, error_name
from redflow.core.models import RunField, WorkflowField, int_field

#: ``DeadlineExceededError.deadline`` (and the run's ``deadlineExceeded`` field): which deadline ended it.
START = "start"
TIMEOUT = "timeout"


def deadline_ms(value: Any, what: str) -> int:
    """A deadline option (seconds > 0, or a timedelta; None for none) in ms (0: none)."""
    if value is None:
        return 0
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise RedflowError(f"{what} must be a finite number of seconds > 0 (or a timedelta), or None for no deadline; got {value!r}")
    return max(1, int(round(seconds * 1000)))


@dataclass(frozen=True, slots=True)
class Deadlines:
    """``start_within`` and ``timeout`` of a workflow, in ms (0: none)."""

    start_within_ms: int = 0
    timeout_ms: int = 0

    @classmethod
    def of(cls, start_within: Any = None, timeout: Any = None) -> Deadlines:
        """From ``define_workflow``'s options; a clear error for a bad value."""
        return cls(deadline_ms(start_within, "start_within"), deadline_ms(timeout, "timeout"))

    @classmethod
    def of_metadata(cls, start_within_ms: str | None, timeout_ms: str | None, *, what: str) -> Deadlines:
        """From a workflow's synced metadata (the two fields, as read)."""
        fields = {WorkflowField.START_WITHIN_MS: start_within_ms or "", WorkflowField.TIMEOUT_MS: timeout_ms or ""}
        return cls(
            max(0, int_field(fields, WorkflowField.START_WITHIN_MS, what=what, default=0) or 0),
            max(0, int_field(fields, WorkflowField.TIMEOUT_MS, what=what, default=0) or 0),
        )

    @property
    def active(self) -> bool:
        return bool(self.start_within_ms or self.timeout_ms)

    def due_ms(self, created_at_ms: int, available_at_ms: int) -> int:
        """When a run created at ``created_at_ms`` to start at ``available_at_ms``
        (0: now) may start: a delay past its deadline ends at the deadline, when
        the run is failed (a run that cannot start in time does not wait longer)."""
        if self.timeout_ms and available_at_ms > created_at_ms + self.timeout_ms:
            return created_at_ms + self.timeout_ms
        return available_at_ms

    def times(self, created_at_ms: int, available_at_ms: int) -> tuple[int | None, int | None]:
        """``startBy`` and ``deadlineAt`` of a run created at ``created_at_ms`` and
        due at ``available_at_ms`` (0: at once); None where there is no such deadline."""
        start_by_ms = max(created_at_ms, available_at_ms) + self.start_within_ms if self.start_within_ms else None
        deadline_ms = created_at_ms + self.timeout_ms if self.timeout_ms else None
        return start_by_ms, deadline_ms

    def run_fields(self, created_at_ms: int, available_at_ms: int) -> dict[str, str]:
        """The fields a new run gets (none without deadlines)."""
        start_by_ms, deadline_ms = self.times(created_at_ms, available_at_ms)
        fields: dict[str, str] = {}
        if start_by_ms is not None:
            fields[RunField.START_WITHIN_MS] = str(self.start_within_ms)
            fields[RunField.START_BY] = str(start_by_ms)
        if deadline_ms is not None:
            fields[RunField.TIMEOUT_MS] = str(self.timeout_ms)
            fields[RunField.DEADLINE_AT] = str(deadline_ms)
        return fields

    def metadata_fields(self) -> dict[str, str]:
        """The fields of the workflow's synced metadata (clients that enqueue it by name apply them)."""
        fields: dict[str, str] = {}
        if self.start_within_ms:
            fields[WorkflowField.START_WITHIN_MS] = str(self.start_within_ms)
        if self.timeout_ms:
            fields[WorkflowField.TIMEOUT_MS] = str(self.timeout_ms)
        return fields


NO_DEADLINES = Deadlines()


def late(start_by_ms: int | None, deadline_ms: int | None, *, started: bool, now_ms: int) -> str:
    """Which deadline a run starting at ``now_ms`` is past, as ``start.lua`` decides:
    :data:`START` (never ``started`` and past ``start_by_ms``), :data:`TIMEOUT`, or ""."""
    if start_by_ms is not None and not started and now_ms > start_by_ms:
        return START
    if deadline_ms is not None and now_ms >= deadline_ms:
        return TIMEOUT
    return ""


def not_started() -> DeadlineExceededError:
    """The error of a run that was not started by its ``startBy``."""
    return DeadlineExceededError("Run not started within its start_within: it never started", deadline=START)


def timed_out() -> DeadlineExceededError:
    """The error of a run past its ``deadlineAt``."""
    return DeadlineExceededError("Run exceeded its timeout", deadline=TIMEOUT)


def retry_past_deadline(error: BaseException, delay_ms: int) -> DeadlineExceededError:
    """The error of a run whose next attempt would be due after its ``deadlineAt``:
    it fails now rather than wait for a retry that could not end in time."""
    failed = DeadlineExceededError(
        f"Run exceeded its timeout: its retry in {delay_ms / 1000:g}s would start after its deadline "
        f"(the attempt failed with {error_name(error)}: {error})",
        deadline=TIMEOUT,
    )
    failed.__cause__ = error
    return failed
