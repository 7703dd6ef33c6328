"""What a handler sees: ``ctx.input``, ``ctx.run``, ``ctx.step``, ``ctx.signal`` (``engine/interrupts.py``),
``ctx.stream`` (``engine/streams.py``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redflow.core.streams import StreamWriter
from redflow.engine.interrupts import CancelSignal
from redflow.engine.run_info import RunInfo

__all__ = ["CancelSignal", "OnFailureContext", "RunInfo", "WorkflowContext"]

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.core.workflow_def import WorkflowDef
    from redflow.engine.step import StepApi

log = logging.getLogger("redflow.attempt")


@dataclass(slots=True)
class WorkflowContext:
    """The argument of a workflow handler."""

    input: Any
    run: RunInfo
    step: StepApi
    signal: CancelSignal
    client: RedflowClient
    #: ``ctx.stream(value)``: append a JSON item to the run's output stream (:class:`StreamWriter`).
    stream: StreamWriter

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


def call_on_failure(workflow: WorkflowDef, error: BaseException, input: Any, run: RunInfo, extra: Mapping[str, Any] | None = None) -> None:
    """Call the workflow's ``on_failure`` for a run that failed for good. What it
    raises is logged and ignored: it must never change how the run ended (as in the seed)."""
    if workflow.on_failure is None:
        return
    try:
        workflow.on_failure(OnFailureContext(error=error, input=input, run=run))
    except Exception:  # deliberately swallowed: see the docstring
        log.exception("on_failure of %s raised; ignored", workflow.name, extra=extra)
