"""Why an attempt stops before its handler is done, and how the handler hears of it.

An attempt is stopped for one of five reasons (the first one sticks): its
run was canceled, its ``timeout`` passed (``core/deadlines.py``), its lease
was lost (another worker may own the run now), Redis failed under a step
record or an ownership check, or the worker is stopping. The lease record
(``engine/lease.py``) carries the reason; the attempt sets the handler's
:class:`CancelSignal` and throws :class:`RunInterrupt` into the greenlet
running the handler. A canceled run ends ``canceled``, a run past its
deadline ``failed`` (``DeadlineExceededError``); the other reasons leave it
to another worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Protocol

import gevent
from gevent.event import Event

#: Why an attempt was stopped (``RunInterrupt.reason``, ``Lease.stopped``).
CANCELED = "canceled"
DEADLINE = "deadline_exceeded"
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


#: Stops after which the attempt is left to another worker, not finalized.
ABANDONING: Final = (LEASE_LOST, REDIS_LOST, WORKER_STOPPED)


class CancelSignal:
    """Set when the run is canceled, passes its deadline, or its worker loses
    the run (lease lost, worker stopping). Long-running code may check ``is_set()`` or ``wait()``;
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


class Stoppable(Protocol):
    """What carries an attempt's stop (its lease record): why it was stopped, the first reason, or None."""

    stopped: str | None


class HandlerInterrupts:
    """Where an attempt's interrupt lands: in the greenlet running its handler,
    and only while that greenlet is inside the handler (not while it settles)."""

    __slots__ = ("_stop", "_greenlet", "_inside", "_pending")

    def __init__(self, stop: Stoppable) -> None:
        self._stop = stop
        self._greenlet: Any = None
        self._inside = False
        self._pending = False

    def enter(self) -> None:
        """The current greenlet is about to call the handler."""
        self._greenlet = gevent.getcurrent()
        self._inside = True

    def leave(self) -> None:
        """The handler returned or raised: nothing is thrown any more."""
        self._inside = False

    def throw_soon(self) -> None:
        """The attempt was stopped: throw :class:`RunInterrupt` into the handler's
        greenlet, from the hub (unless this is that greenlet: it raises itself)."""
        if self._inside and not self._pending and self._greenlet is not gevent.getcurrent():
            self._pending = True
            gevent.get_hub().loop.run_callback(self._throw)

    def _throw(self) -> None:
        # Runs in the hub, so the handler's greenlet is suspended: if it is
        # still inside the handler, the interrupt lands there, as a
        # gevent.Timeout would; if it has moved on (settling), nothing happens.
        self._pending = False
        glet = self._greenlet
        if self._inside and glet is not None and not glet.dead:
            glet.throw(RunInterrupt(self._stop.stopped or CANCELED))

    def raise_if_stopped(self) -> None:
        reason = self._stop.stopped
        if reason is not None:
            raise RunInterrupt(reason)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Nothing is thrown into the handler inside: a stop meanwhile is raised at the end."""
        held, self._inside = self._inside, False
        try:
            yield
        finally:
            self._inside = held
        self.raise_if_stopped()
