"""What the inline test runner (``redflow/testing/inline.py``) keeps of each run:
:class:`InlineRun`, what a worker would have stored, and the events it emitted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redflow.core.errors import CanceledError, RedflowError, RunFailedError, error_to_json
from redflow.core.models import Step
from redflow.engine.waits import ParkRequest
from redflow.testing.inline_stream import InlineStream

#: The statuses of a run that has not ended.
UNFINISHED = ("queued", "running", "scheduled")


@dataclass(frozen=True, slots=True)
class InlineEvent:
    """An event a run emitted (``at`` is ``None``) or scheduled."""

    name: str
    payload: Any
    at: float | None
    run_ids: tuple[str, ...]


@dataclass(eq=False)
class InlineRun:
    """One run executed by an ``InlineRunner``: what a worker would have stored."""

    id: str
    workflow: str
    input: Any
    max_attempts: int
    status: str = "queued"  # then succeeded | failed | canceled; "scheduled" while delayed or parked
    output: Any = None
    error: BaseException | None = None
    attempt: int = 0
    step_records: dict[str, str] = field(default_factory=dict)  # name -> step JSON, as in Redis
    children: list[InlineRun] = field(default_factory=list)
    events: list[InlineEvent] = field(default_factory=list)
    progress: Any = None
    stream: InlineStream = field(default_factory=InlineStream)  # what ctx.stream wrote: StreamItem (id, value), .attempt
    parent_id: str | None = None
    #: While parked in a durable wait (status ``scheduled``): the wait.
    parked: ParkRequest | None = None
    #: A delayed run (status ``scheduled``): when it is due, on the runner's clock (ms).
    due_ms: int | None = None
    #: Its deadlines on the runner's clock (ms; None: none): the latest first start, the end of its timeout.
    start_by_ms: int | None = None
    deadline_ms: int | None = None
    #: The wait before each retry, in ms (the runner's clock moved on by each).
    retry_delays_ms: list[int] = field(default_factory=list)
    #: When it was created (the runner's clock, ms); how many calls a singleton skipped into it, or a debounce collapsed.
    created_ms: int = 0
    skipped_calls: int = 0
    collapsed_calls: int = 0

    @property
    def steps(self) -> list[Step]:
        """The run's steps as :class:`redflow.Step` objects, in seq order."""
        return sorted((Step.from_json(name, raw) for name, raw in self.step_records.items()), key=lambda s: (s.seq, s.name))

    def result(self) -> Any:
        """The output; for a failed or canceled run, its error itself is raised (with its traceback)."""
        if self.status == "succeeded":
            return self.output
        if self.error is not None:
            raise self.error
        if self.parked is not None:
            raise RedflowError(
                f"run {self.id} is parked ({self.parked.reason} in step {self.parked.step!r}): "
                "use InlineRunner.emit_event, signal or advance to resume it"
            )
        raise RedflowError(f"run {self.id} did not run (status {self.status!r})")

    def outcome(self) -> Any:
        """What a parent's ``step.run_workflow`` sees: the output, ``RunFailedError`` or ``CanceledError``."""
        if self.status == "failed" and self.error is not None:
            raise RunFailedError(self.id, error_to_json(self.error))
        if self.status == "canceled":
            raise CanceledError()
        return self.result()

    def cancel_children(self, reason: str) -> list[InlineRun]:
        """Cancel its unfinished children, and theirs (the cancel cascade); the runs canceled."""
        canceled: list[InlineRun] = []
        for child in self.children:
            if child.status in UNFINISHED:
                child.status, child.error, child.parked, child.due_ms = "canceled", CanceledError(reason), None, None
                canceled.append(child)
            canceled += child.cancel_children(reason)
        return canceled
