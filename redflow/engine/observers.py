"""Worker observers: how metrics, benchmarks and tests watch a worker.

Pass objects to ``start_worker(observers=[...])``; each may implement any of
the methods of :class:`WorkerObserver`. They are called on the worker's
greenlets, on the hot path: they must be quick and must not block. An
observer that raises is logged and otherwise ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("redflow.hooks")


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


class WorkerObserver:
    """No-op base; override what you need."""

    def on_attempt(self, report: AttemptReport) -> None:
        """An attempt ended (any outcome)."""

    def on_start(self, run_id: str, workflow: str, queue: str, attempt: int) -> None:
        """An attempt started: lease held, status running, the handler about to run."""

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

    def add(self, observer: Any) -> None:
        self._observers.append(observer)
        self.active = True

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

    def on_claim(self, queue: str, waited_s: float) -> None:
        self._call("on_claim", queue, waited_s)

    def on_lease_lost(self, run_id: str) -> None:
        self._call("on_lease_lost", run_id)

    def on_recovered(self, queue: str, count: int) -> None:
        self._call("on_recovered", queue, count)
