"""What a handler sees: ``ctx.input``, ``ctx.run``, ``ctx.step``, ``ctx.signal``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gevent.event import Event

from redflow.core.tags import NO_TAGS

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.engine.step import StepApi


#: Why an attempt was stopped (``RunInterrupt.reason``).
CANCELED = "canceled"
LEASE_LOST = "lease_lost"
REDIS_LOST = "redis_unavailable"
WORKER_STOPPED = "worker_stopped"


class RunInterrupt(BaseException):
    """Thrown into the greenlet running a handler to stop it (canceled, lease
    lost, Redis gone, worker stopping). Not an ``Exception``, so that a
    handler's ``except Exception:`` cannot swallow it (a handler that
    swallows ``BaseException`` keeps its slot busy). Internal to the worker."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run an attempt executes (``tags``: the run's, which its child runs inherit)."""

    id: str
    workflow: str
    queue: str
    attempt: int
    max_attempts: int
    tags: Mapping[str, str] = field(default_factory=lambda: NO_TAGS)


class CancelSignal:
    """Set when the run is canceled or its worker loses the run (lease lost,
    worker stopping). Long-running code may check ``is_set()`` or ``wait()``;
    the worker also stops the handler greenlet itself."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        self._event: Event | None = None  # made on first wait(): most runs never wait
        self.reason: str | None = None

    def is_set(self) -> bool:
        return self.reason is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set (or ``timeout`` seconds); returns whether it is set."""
        if self.reason is not None:
            return True
        if self._event is None:
            self._event = Event()
        return bool(self._event.wait(timeout))

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            if self._event is not None:
                self._event.set()

    def __repr__(self) -> str:
        return f"CancelSignal(set={self.is_set()}, reason={self.reason!r})"


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
