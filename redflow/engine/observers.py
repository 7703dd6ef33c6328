"""Worker observers: how metrics, benchmarks and tests watch a worker.

Pass objects to ``start_worker(observers=[...])``; each may implement any of
the methods of :class:`WorkerObserver`. They are called on the worker's
greenlets, on the hot path: they must be quick and must not block. An
observer that raises is logged and otherwise ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redflow.engine.context import RunInfo

log = logging.getLogger("redflow.hooks")

#: Observers every worker started from now on gets besides its own (tracing
#: installs itself here: see :func:`add_global_observer`).
_GLOBAL: list[Any] = []
_NO_SCOPE: AbstractContextManager[None] = nullcontext()


def add_global_observer(observer: Any) -> None:
    """Give ``observer`` to every worker started after this call."""
    if observer not in _GLOBAL:
        _GLOBAL.append(observer)


def remove_global_observer(observer: Any) -> None:
    if observer in _GLOBAL:
        _GLOBAL.remove(observer)


def global_observers() -> list[Any]:
    return list(_GLOBAL)


@dataclass(frozen=True, slots=True)
class AttemptReport:
    """One finished attempt. Times are ``time.time()`` floats taken on the hot path."""

    run_id: str
    workflow: str
    queue: str
    attempt: int
    outcome: str  # succeeded | failed | retried | canceled | parked | abandoned | skipped
    claimed_at: float  # the run left the ready list
    started_at: float  # the start script returned (lease held, status running)
    finished_at: float  # the settle script returned
    created_at_ms: int | None  # when the run was enqueued (from its hash), if known
    deadline: str = ""  # "start" | "timeout": the deadline that failed the run ("" for none)


class WorkerObserver:
    """No-op base; override what you need."""

    def on_attempt(self, report: AttemptReport) -> None:
        """An attempt ended (any outcome)."""

    def on_start(self, run_id: str, workflow: str, queue: str, attempt: int) -> None:
        """An attempt started: lease held, status running, the handler about to run."""

    def on_attempt_begin(self, info: RunInfo, fields: Mapping[str, str]) -> None:
        """Right after ``on_start``, with the run and its hash as the start read it
        (e.g. a ``traceparent``). Called in the greenlet that runs the handler; the
        attempt's ``on_attempt`` comes later in the same greenlet."""

    def step_scope(self, info: RunInfo, step: str) -> AbstractContextManager[None]:
        """A context manager around a step function's call (tracing spans). A
        replayed step is not called, so it has no scope."""
        return _NO_SCOPE

    def on_step(self, workflow: str, step: str, status: str, duration_s: float) -> None:
        """A step ran (not called for replayed steps)."""

    def on_claim(self, queue: str, waited_s: float) -> None:
        """A slot claimed a run after waiting ``waited_s`` in LMOVE/BLMOVE."""

    def on_lease_lost(self, run_id: str) -> None:
        """The worker lost a run's lease and stopped the attempt."""

    def on_recovered(self, queue: str, count: int) -> None:
        """The reaper returned ``count`` runs of dead workers to ready."""


class Observers(WorkerObserver):
    """Fans each call out to several observers, isolating their failures."""

    def __init__(self, observers: Iterable[Any] = ()) -> None:
        self._observers = list(observers)
        self.active = bool(self._observers)
        self._scoped = [o for o in self._observers if callable(getattr(o, "step_scope", None))]

    def add(self, observer: Any) -> None:
        self._observers.append(observer)
        self.active = True
        if callable(getattr(observer, "step_scope", None)):
            self._scoped.append(observer)

    def _call(self, method: str, *args: Any) -> None:
        for observer in self._observers:
            fn = getattr(observer, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:  # an observer must never break the worker
                log.exception("observer %r failed in %s", observer, method)

    def on_attempt(self, report: AttemptReport) -> None:
        self._call("on_attempt", report)

    def on_start(self, run_id: str, workflow: str, queue: str, attempt: int) -> None:
        self._call("on_start", run_id, workflow, queue, attempt)

    def on_step(self, workflow: str, step: str, status: str, duration_s: float) -> None:
        self._call("on_step", workflow, step, status, duration_s)

    def on_attempt_begin(self, info: RunInfo, fields: Mapping[str, str]) -> None:
        self._call("on_attempt_begin", info, fields)

    def step_scope(self, info: RunInfo, step: str) -> AbstractContextManager[Any]:
        """Every observer's scope, nested (none: a shared no-op)."""
        if not self._scoped:
            return _NO_SCOPE
        stack = ExitStack()
        for observer in self._scoped:
            try:
                stack.enter_context(observer.step_scope(info, step))
            except Exception:  # an observer must never break the step
                log.exception("observer %r failed in step_scope", observer)
        return stack

    def on_claim(self, queue: str, waited_s: float) -> None:
        self._call("on_claim", queue, waited_s)

    def on_lease_lost(self, run_id: str) -> None:
        self._call("on_lease_lost", run_id)

    def on_recovered(self, queue: str, count: int) -> None:
        self._call("on_recovered", queue, count)
