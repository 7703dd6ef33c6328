"""What one attempt ended in: the outcome values, and the one rule that decides them.

The worker's attempt (``engine/attempt.py``) and the inline test runner
(``redflow/testing/inline.py``) both call the handler, wrap how it ended in
a :class:`HandlerEnd` (:func:`returned` for a value it returned) and ask
:func:`decide` for the outcome, so that the two cannot drift apart. The
retry delay is decided here too (a workflow's retry policy plugs in here).
No I/O: settling the outcome is the attempt's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from redflow.core.errors import CanceledError, OutputSerializationError, SerializationError
from redflow.core.retry import compute_retry_delay_ms, is_retryable
from redflow.core.workflow_def import WorkflowDef
from redflow.engine.interrupts import ABANDONING, CANCELED
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


def decide(end: HandlerEnd, run: RunInfo, workflow: WorkflowDef | None = None) -> Outcome:
    """The outcome of an attempt of ``run`` whose handler ended so. A stop for
    a lost lease, Redis or the worker leaves the run to another worker; a
    cancel (or a ``CanceledError`` raised) cancels it; a durable wait parks
    it; an error is retried while the run has attempts left and the error
    allows it, else the run fails. ``workflow``: the run's, when known (its
    retry rules; today every workflow has the same)."""
    error = end.error
    if end.interrupted in ABANDONING:
        return Abandoned(end.interrupted or "")
    if end.interrupted == CANCELED or isinstance(error, CanceledError):
        return Canceled(error if isinstance(error, CanceledError) else CanceledError())
    if isinstance(error, ParkRun):
        return Parked(error.request)
    if error is not None:
        if is_retryable(error) and run.attempt < run.max_attempts:
            return Retrying(error, compute_retry_delay_ms(run.attempt))
        return Failed(error)
    return Succeeded(end.output_json or "null")
