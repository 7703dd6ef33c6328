"""What a handler sees: ``ctx.input``, ``ctx.run``, ``ctx.step``, ``ctx.signal`` (``engine/interrupts.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redflow.engine.interrupts import CancelSignal
from redflow.engine.run_info import RunInfo

__all__ = ["CancelSignal", "OnFailureContext", "RunInfo", "WorkflowContext"]

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.engine.step import StepApi


@dataclass(slots=True)
class WorkflowContext:
    """The argument of a workflow handler."""

    input: Any
    run: RunInfo
    step: StepApi
    signal: CancelSignal
    client: RedflowClient

    def progress(self, value: Any) -> None:
        """Keep ``value`` (JSON) on the run as its progress, latest wins: one write,
        read with ``handle.progress()`` or ``client.get_run(id).progress``."""
        self.step.report_progress(value)


@dataclass(frozen=True, slots=True)
class OnFailureContext:
    """The argument of ``on_failure``: why the run failed for good."""

    error: BaseException
    input: Any
    run: RunInfo
