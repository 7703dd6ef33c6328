"""What durable steps ask of the attempt they run in, and of its client.

``ctx.step`` (:class:`~redflow.engine.step.StepApi`) and the durable waits
(``engine/waits.py``) work for a :class:`StepHost`: the worker's ``Attempt``
and the inline test runner's attempt both implement it, so that the two
cannot drift apart. The waits record their steps through the step API's
public :class:`Recorder` interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from redflow.core.models import OBJECT_RECORDS, StepForm

if TYPE_CHECKING:
    from redflow.core.models import EventWaiter
    from redflow.core.run_state import RunState
    from redflow.core.workflow_def import WorkflowDef
    from redflow.engine.interrupts import CancelSignal
    from redflow.engine.run_info import RunInfo
    from redflow.store.payloads import Payloads
    from redflow.store.replies import StepSaved
    from redflow.store.requests import SignalTake

T = TypeVar("T")


@dataclass(slots=True)
class RunningStep:
    """A step in progress, for the lease keeper's ``running`` marker (written in ``form``)."""

    name: str
    seq: int
    started_at_ms: int
    attempt: int = 1
    form: StepForm = OBJECT_RECORDS
    marked: bool = False

    def marker(self) -> str:
        """The ``running`` record the lease keeper writes for a step that takes long."""
        return self.form.running(self.seq, self.attempt, self.started_at_ms)


class StepClient(Protocol):
    """What steps start runs and events with (public API): a ``RedflowClient``, or the inline runner's stand-in."""

    def run(
        self,
        workflow: WorkflowDef | str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        max_attempts: int | None = None,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Any: ...
    def wait_for(self, run_id: str, *, timeout: float = 30.0, assist: Any = None) -> Any: ...
    def emit_event(self, name: str, payload: Any = None, idempotency_key: str | None = None) -> list[str]: ...
    def schedule_event(self, name: str, payload: Any = None, at: float | None = None, idempotency_key: str | None = None) -> list[str]: ...


class StepHost(Protocol):
    """The attempt a step API works for."""

    @property
    def run_id(self) -> str: ...
    @property
    def info(self) -> RunInfo: ...
    @property
    def signal(self) -> CancelSignal: ...
    @property
    def running_steps(self) -> MutableMapping[str, RunningStep]: ...
    @property
    def client(self) -> StepClient: ...
    @property
    def payloads(self) -> Payloads: ...
    @property
    def step_form(self) -> StepForm: ...
    def now_ms(self) -> int: ...
    def raise_if_interrupted(self) -> None: ...
    def confirm_owner(self) -> None: ...
    def fence_children(self, create: Callable[[], T]) -> T: ...
    def save_step(self, name: str, step_json: str, expected: str = "", blob: tuple[str, str] | None = None) -> str | None: ...
    def set_progress(self, value_json: str) -> None: ...
    def step_scope(self, name: str) -> AbstractContextManager[Any]: ...
    def step_observed(self, name: str, status: str, duration_s: float) -> None: ...
    def pause(self, delay_ms: int) -> None: ...
    def run_child_inline(self, queue: str, child_id: str) -> bool: ...
    # -- the durable waits' engine side (not the client's) -----------------------
    def start_children(self, workflow: WorkflowDef | str, inputs: Sequence[Any], step: str) -> list[str]: ...
    def read_states(self, run_ids: Sequence[str]) -> list[RunState | None]: ...
    def register_event_wait(self, event: str, waiter: EventWaiter) -> None: ...
    def forget_event_wait(self, event: str, waiter: EventWaiter) -> None: ...
    def take_signal(self, take: SignalTake) -> StepSaved: ...
    def emit_run(self, workflow: WorkflowDef | str, input: Any, options: Mapping[str, Any]) -> str: ...


class Recorder(Protocol):
    """How a step is recorded (``StepApi``'s public interface, for the durable waits)."""

    def begin(self, name: str) -> dict[str, Any] | None: ...
    def replay(self, name: str, record: dict[str, Any]) -> Any: ...
    def stored(self, name: str) -> str: ...
    def seq_of(self, record: dict[str, Any] | None) -> int: ...
    def execute(
        self,
        name: str,
        seq: int,
        fn: Callable[..., Any],
        timeout: float | None = None,
        *,
        started_at_ms: int | None = None,
        expected: str = "",
        tries: int = 0,
    ) -> Any: ...
