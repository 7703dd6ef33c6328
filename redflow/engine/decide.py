"""What one attempt ended in: the outcome values, and the one rule that decides them.

The worker's attempt (``engine/attempt.py``) and the inline test runner
(``redflow/testing/inline.py``) both call the handler, wrap how it ended in
a :class:`HandlerEnd` (:func:`returned` for a value it returned) and ask
:func:`decide` for the outcome, so that the two cannot drift apart. The
retry delay is decided here too (a workflow's retry policy,
``core/retry.py``), and so is what a deadline does (``core/deadlines.py``).
No I/O: settling the outcome is the attempt's business.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from redflow.core.deadlines import retry_past_deadline, timed_out
from redflow.core.errors import CanceledError, OutputSerializationError, SerializationError
from redflow.core.retry import retry_delay_ms
from redflow.core.workflow_def import WorkflowDef
from redflow.engine.interrupts import ABANDONING, CANCELED, DEADLINE
from redflow.engine.run_info import RunInfo
from redflow.engine.waits import ParkRequest, ParkRun
from redflow.store.payloads import Payloads

# Per-run values are plain slotted dataclasses: a frozen one's __init__ costs
# three times as much, on the hot path.


@dataclass(slots=True)
class Succeeded:
    kind: ClassVar[str] = "succeeded"
    output_json: str


@dataclass(slots=True)
class Failed:
    kind: ClassVar[str] = "failed"
    error: BaseException


@dataclass(slots=True)
class Retrying:
    """Failed, to be tried again in ``delay_ms`` (from when it is settled)."""

    kind: ClassVar[str] = "retried"
    error: BaseException
    delay_ms: int


@dataclass(slots=True)
class Canceled:
    kind: ClassVar[str] = "canceled"
    error: BaseException


@dataclass(slots=True)
class Parked:
    """Waiting durably (sleep, event, children): the run is ``scheduled`` until its wait ends."""

    kind: ClassVar[str] = "parked"
    request: ParkRequest


@dataclass(slots=True)
class Abandoned:
    """Left for another worker: the lease was lost or the worker is stopping."""

    kind: ClassVar[str] = "abandoned"
    reason: str


@dataclass(slots=True)
class Skipped:
    """Nothing to run: another worker holds it, or it is gone / finished / scheduled."""

    kind: ClassVar[str] = "skipped"
    reason: str


Outcome = Succeeded | Failed | Retrying | Canceled | Parked | Abandoned | Skipped


@dataclass(slots=True)
class HandlerEnd:
    """How a handler's call ended: it returned (``output_json``: its output as
    stored) or raised ``error``; ``interrupted``: why the attempt was stopped
    meanwhile, if it was (the first reason)."""

    output_json: str | None = None
    error: BaseException | None = None
    interrupted: str | None = None


def returned(value: Any, payloads: Payloads, interrupted: str | None = None) -> HandlerEnd:
    """The end of a handler that returned ``value``: its output, or the error
    that it cannot be stored (not retried: the same value would come back)."""
    try:
        return HandlerEnd(payloads.dumps(value, what="output"), None, interrupted)
    except SerializationError as exc:
        return HandlerEnd(None, OutputSerializationError(f"Workflow output is not JSON-serializable: {exc}"), interrupted)


def decide(end: HandlerEnd, run: RunInfo, workflow: WorkflowDef | None = None, now_ms: int = 0) -> Outcome:
    """The outcome of an attempt of ``run`` whose handler ended so, at ``now_ms``
    (Redis's clock). A stop for a lost lease, Redis or the worker leaves the
    run to another worker; its deadline passing fails it
    (``DeadlineExceededError``); a cancel (or a ``CanceledError`` raised)
    cancels it; a durable wait parks it (waking at its deadline at the
    latest); an error is retried, after the wait ``workflow``'s retry policy
    says, while the run has attempts left, the policy allows it and the retry
    would start before the run's deadline; else the run fails."""
    error = end.error
    if end.interrupted in ABANDONING:
        return Abandoned(end.interrupted or "")
    if end.interrupted == DEADLINE:
        return Failed(timed_out())
    if end.interrupted == CANCELED or isinstance(error, CanceledError):
        return Canceled(error if isinstance(error, CanceledError) else CanceledError())
    if isinstance(error, ParkRun):
        return _park(error.request, run.deadline_ms, now_ms)
    if error is not None:
        delay_ms = retry_delay_ms(error, run.attempt, workflow.retry if workflow is not None else None)
        if delay_ms is None or run.attempt >= run.max_attempts:
            return Failed(error)
        if run.deadline_ms is not None and now_ms + delay_ms >= run.deadline_ms:
            return Failed(retry_past_deadline(error, delay_ms))
        return Retrying(error, delay_ms)
    return Succeeded(end.output_json or "null")


def _park(request: ParkRequest, deadline_ms: int | None, now_ms: int) -> Outcome:
    """A durable wait parks the run until its wake time, or its deadline if that comes first."""
    if deadline_ms is None or request.wake_at_ms <= deadline_ms:
        return Parked(request)
    if now_ms >= deadline_ms:
        return Failed(timed_out())
    return Parked(replace(request, wake_at_ms=deadline_ms))
