"""The lease keeper: one greenlet per worker watches every in-flight attempt.

Per tick (100 ms by default) it sends one pipeline for all attempts that
need it: lease renewals (each lease once per ``lease_ms / 2``), the cancel
notices (``cancel_run.lua`` notes a cancel of a running run in one key: a
tick reads the notices of the last seconds in one command, or one per
queue on a cluster, whatever the runs in flight; a notice for a run here
is confirmed by its ``cancelRequestedAt`` at the next tick), each run's
``cancelRequestedAt`` with its renewal (a cancel another client wrote
without a notice), and ``running`` markers for steps that take longer
than a tick; an attempt whose run's ``timeout`` passed is stopped (no
Redis command: the deadline came with the run). Runs that finish within a
tick cost nothing here. Two failed renewals in a row, or a renewal refused because
the lease is not ours any more, stop the attempt as "lease lost".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event
from redis.exceptions import NoScriptError, RedisError

from redflow.core.models import RunField
from redflow.engine.interrupts import CANCELED, DEADLINE, LEASE_LOST
from redflow.engine.observers import Observers
from redflow.store.replies import StepSaved

if TYPE_CHECKING:
    from redflow.engine.step_host import RunningStep
    from redflow.store.scripts import Scripts

log = logging.getLogger("redflow.lease")

MAX_RENEW_FAILURES = 2
#: A tick reads the cancel notices of the last this many ms (a notice written with a clock a little behind is still seen).
NOTICE_MARGIN_MS = 2000


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


def _ignore_stop(reason: str) -> None:
    """A detached lease's attempt is over: there is nothing to stop."""


def _no_extra() -> dict[str, Any]:
    return {}


@dataclass(eq=False)
class Lease:
    """What the keeper knows of one attempt: the lease to renew, the steps
    to mark, and one callback to stop the attempt. The attempt makes it and
    stops itself through :meth:`stop` too, so the keeper sees every stop.
    ``renewed_at_ms`` (monotonic) is when the lease was last written: set by
    the attempt when its start is sent, then by the keeper's renewals."""

    run_id: str
    queue: str
    token: str
    running_steps: Mapping[str, RunningStep]
    on_stop: Callable[[str], None]
    log_extra: Callable[[], dict[str, Any]]
    stopped: str | None = None
    lost: bool = False
    tracked_at_ms: float = field(default=0.0, repr=False)
    renewed_at_ms: float = field(default=0.0, repr=False)
    renew_failures: int = field(default=0, repr=False)
    #: The run's ``deadlineAt`` (Redis ms; 0: none): the keeper stops the attempt when it passes.
    deadline_ms: int = field(default=0, repr=False)

    def detach(self) -> None:
        """The attempt is over: drop the callbacks into it (see ``Attempt.execute``)."""
        self.on_stop = _ignore_stop
        self.log_extra = _no_extra

    def written(self, sent_ms: float) -> None:
        """A call sent at ``sent_ms`` (monotonic) wrote or extended the lease."""
        if sent_ms > self.renewed_at_ms:
            self.renewed_at_ms = sent_ms

    def fresh(self, lease_ms: int, now_ms: float) -> bool:
        """Written less than half a lease ago, so it cannot have lapsed: the run hash's fence
        is check enough for a step record or a settle (they read the lease key otherwise)."""
        return now_ms - self.renewed_at_ms < lease_ms / 2

    def stop(self, reason: str) -> None:
        """Stop the attempt (canceled, lease lost, worker stopping, Redis lost); the first reason sticks."""
        if self.stopped is None:
            self.stopped = reason
        self.on_stop(self.stopped)


class LeaseKeeper:
    """Renews leases, polls cancellation and marks long steps, in one greenlet."""

    def __init__(
        self, scripts: Scripts, *, lease_ms: int, now_ms: Callable[[], int], tick_ms: int = 100, observers: Observers | None = None
    ) -> None:
        self._observers = observers or Observers()
        self._scripts = scripts
        self._now_ms = now_ms
        self.lease_ms = lease_ms
        self.renew_every_ms = lease_ms / 2
        self.tick_ms = max(10, min(tick_ms, lease_ms // 4))
        self._leases: dict[int, Lease] = {}
        self._notices_since: dict[str, int] = {}  # notices key -> where the next read starts (Redis ms)
        self._confirm: list[Lease] = []  # leases a notice named: their run's cancelRequestedAt is read next tick
        self._stop = Event()
        self._greenlet: gevent.Greenlet | None = None
        self.renewals_lost = 0

    def track(self, lease: Lease) -> None:
        """Watch an attempt's lease; ``lease.renewed_at_ms`` says when it was last
        written (the start request's send time), else it counts from now."""
        now_ms = _mono_ms()
        lease.tracked_at_ms = now_ms
        lease.renewed_at_ms = lease.renewed_at_ms or now_ms
        lease.renew_failures = 0
        self._leases[id(lease)] = lease

    def untrack(self, lease: Lease) -> None:
        self._leases.pop(id(lease), None)

    @property
    def tracked(self) -> int:
        return len(self._leases)

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._loop)
        self._greenlet.name = "redflow-lease-keeper"

    def stop(self) -> None:
        self._stop.set()
        if self._greenlet is not None:
            self._greenlet.join(timeout=2)
            self._greenlet.kill(block=False)

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_ms / 1000.0):
            try:
                self.tick()
            except Exception:  # never let the keeper die: leases depend on it
                log.exception("lease keeper tick failed")

    def tick(self) -> None:
        mono_ms = _mono_ms()
        renew: list[Lease] = []
        watch_now: list[Lease] = []
        markers: list[tuple[Lease, Any]] = []
        wall_ms = self._now_ms()
        for lease in list(self._leases.values()):
            if lease.stopped is not None:
                continue
            if lease.deadline_ms and wall_ms >= lease.deadline_ms:
                lease.stop(DEADLINE)  # its timeout passed: the run fails (engine/decide.py)
                continue
            if mono_ms - lease.renewed_at_ms >= self.renew_every_ms:
                renew.append(lease)
            if mono_ms - lease.tracked_at_ms >= self.tick_ms:
                watch_now.append(lease)
            for step in lease.running_steps.values():
                if not step.marked and wall_ms - step.started_at_ms >= self.tick_ms:
                    markers.append((lease, step))
        watch, self._confirm = [*renew, *(lease for lease in self._confirm if lease not in renew)], []
        notices = self._notice_keys(watch_now)
        if not (renew or watch or markers or notices):
            return
        pipe = self._scripts.batch()
        keys = self._scripts.keys
        for lease in renew:
            self._scripts.renew_run_lease(run_id=lease.run_id, queue=lease.queue, token=lease.token, lease_ms=self.lease_ms, conn=pipe)
        for lease in watch:
            pipe.hget(keys.run(lease.run_id, lease.queue), RunField.CANCEL_REQUESTED_AT)
        for lease, step in markers:
            self._scripts.save_step(
                run_id=lease.run_id,
                queue=lease.queue,
                token=lease.token,
                name=step.name,
                step_json=step.marker(),
                lease_ms=self.lease_ms,
                marker_started_at_ms=step.started_at_ms,
                conn=pipe,
            )
        for key in notices:  # last: their replies are the tail
            pipe.zrangebyscore(key, self._notices_since.get(key, wall_ms - NOTICE_MARGIN_MS), "+inf")
            self._notices_since[key] = wall_ms - NOTICE_MARGIN_MS
        try:
            replies = pipe.execute(raise_on_error=False)
        except RedisError as exc:
            log.warning("lease keeper: Redis unavailable (%s)", exc)
            for lease in renew:
                self._renew_failed(lease, exc)
            return
        self._apply(renew, watch, markers, replies, mono_ms)
        self._noticed(watch_now, replies[len(replies) - len(notices) :])

    def _notice_keys(self, leases: list[Lease]) -> list[str]:
        """The cancel notices keys to read this tick: one, or on a cluster one per queue of ``leases``."""
        keys = self._scripts.keys
        if not leases:
            return []
        if not keys.cluster:
            return [keys.cancel_notices()]
        return sorted({keys.cancel_notices(lease.queue) for lease in leases})

    def _noticed(self, leases: list[Lease], replies: list[Any]) -> None:
        """Runs a notice names: their ``cancelRequestedAt`` is read at the next tick (a notice may
        be an earlier attempt's, a minute old at most), which stops them if it is set."""
        named = {run_id for reply in replies if isinstance(reply, list) for run_id in reply}
        if named:
            self._confirm.extend(lease for lease in leases if lease.run_id in named and self._still_tracked(lease))

    def _apply(self, renew: list[Lease], watch: list[Lease], markers: list[tuple[Lease, Any]], replies: list[Any], mono_ms: float) -> None:
        replies_iter = iter(replies)
        if any(isinstance(reply, NoScriptError) for reply in replies):
            self._scripts.load_all()  # a promoted replica: retried at the next tick, not a failure
        # An attempt that ended while the pipeline was in flight has settled and
        # released its lease: a refused renewal or marker says nothing about a
        # lost lease then, only that the run is over. Its replies are dropped.
        for lease in renew:
            reply = next(replies_iter)
            if isinstance(reply, NoScriptError) or not self._still_tracked(lease):
                continue
            if isinstance(reply, Exception):
                self._renew_failed(lease, reply)
            elif not reply:
                self.report_lost(lease, "the lease is held by another worker or expired")
            else:
                lease.renewed_at_ms = mono_ms
                lease.renew_failures = 0
        for lease in watch:
            reply = next(replies_iter)
            if isinstance(reply, str) and reply and self._still_tracked(lease):
                lease.stop(CANCELED)
        for lease, step in markers:
            reply = next(replies_iter)
            if not self._still_tracked(lease):
                continue
            if isinstance(reply, StepSaved) and reply.state == "stale":
                self.report_lost(lease, "a step marker was refused")
            elif not isinstance(reply, Exception):
                step.marked = True

    def _still_tracked(self, lease: Lease) -> bool:
        return self._leases.get(id(lease)) is lease

    def _renew_failed(self, lease: Lease, exc: BaseException) -> None:
        lease.renew_failures += 1
        if lease.renew_failures >= MAX_RENEW_FAILURES:
            self.report_lost(lease, f"{lease.renew_failures} renewals failed ({exc})")

    def report_lost(self, lease: Lease, why: str) -> None:
        """The one place a lost lease is logged, counted and acted on (the
        keeper's refused renewals and markers, and an attempt's refused step
        record, ownership check or settle), so that the warning and the metric
        mean exactly that."""
        if lease.lost:
            return  # reported once per lease
        lease.lost = True
        self.renewals_lost += 1
        self._observers.on_lease_lost(lease.run_id)
        log.warning("lease lost for run %s: %s", lease.run_id, why, extra=lease.log_extra())
        lease.stop(LEASE_LOST)
