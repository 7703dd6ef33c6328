"""The lease keeper: one greenlet per worker watches every in-flight attempt.

Per tick (100 ms by default) it sends one pipeline for all attempts that
need it: lease renewals (each lease once per ``lease_ms / 2``), cancel
checks (``cancelRequestedAt``, for attempts older than one tick) and
``running`` markers for steps that take longer than a tick. Runs that finish
within a tick cost nothing here, which keeps the hot path at three round
trips per run. Two failed renewals in a row, or a renewal refused because
the lease is not ours any more, stop the attempt as "lease lost".
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

import gevent
from gevent.event import Event
from redis.exceptions import NoScriptError, RedisError

from redflow.engine.observers import Observers
from redflow.core.models import RunField, step_running_json

if TYPE_CHECKING:
    from redflow.engine.attempt import Attempt
    from redflow.store.scripts import Scripts

log = logging.getLogger("redflow.lease")

MAX_RENEW_FAILURES = 2


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


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
        self._attempts: dict[int, Attempt] = {}
        self._stop = Event()
        self._greenlet: gevent.Greenlet | None = None
        self.renewals_lost = 0

    def track(self, attempt: Attempt) -> None:
        now = _mono_ms()
        attempt.tracked_at_ms = now
        attempt.renewed_at_ms = now
        attempt.renew_failures = 0
        self._attempts[id(attempt)] = attempt

    def untrack(self, attempt: Attempt) -> None:
        self._attempts.pop(id(attempt), None)

    @property
    def tracked(self) -> int:
        return len(self._attempts)

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
        now = _mono_ms()
        renew: list[Attempt] = []
        watch: list[Attempt] = []
        markers: list[tuple[Attempt, Any]] = []
        wall_ms = self._now_ms()
        for attempt in list(self._attempts.values()):
            if attempt.interrupted is not None:
                continue
            if now - attempt.renewed_at_ms >= self.renew_every_ms:
                renew.append(attempt)
            if now - attempt.tracked_at_ms >= self.tick_ms:
                watch.append(attempt)
            for step in attempt.running_steps.values():
                if not step.marked and wall_ms - step.started_at >= self.tick_ms:
                    markers.append((attempt, step))
        if not (renew or watch or markers):
            return
        pipe = self._scripts.batch()
        keys = self._scripts.keys
        for attempt in renew:
            lease_key = keys.run_lease(attempt.run_id, attempt.queue)
            self._scripts.renew_lease(lease_key=lease_key, token=attempt.token, lease_ms=self.lease_ms, conn=pipe)
        for attempt in watch:
            pipe.hget(keys.run(attempt.run_id, attempt.queue), RunField.CANCEL_REQUESTED_AT)
        for attempt, step in markers:
            self._scripts.save_step(
                run_id=attempt.run_id,
                queue=attempt.queue,
                token=attempt.token,
                name=step.name,
                step_json=step_running_json(step.seq, step.started_at),
                lease_ms=self.lease_ms,
                marker_started_at=step.started_at,
                conn=pipe,
            )
        try:
            replies = pipe.execute(raise_on_error=False)
        except RedisError as exc:
            log.warning("lease keeper: Redis unavailable (%s)", exc)
            for attempt in renew:
                self._renew_failed(attempt, exc)
            return
        self._apply(renew, watch, markers, replies, now)

    def _apply(self, renew: list[Attempt], watch: list[Attempt], markers: list[tuple[Attempt, Any]], replies: list[Any], now: float) -> None:
        replies_iter = iter(replies)
        if any(isinstance(reply, NoScriptError) for reply in replies):
            self._scripts.load_all()  # a promoted replica: retried at the next tick, not a failure
        # An attempt that ended while the pipeline was in flight has settled and
        # released its lease: a refused renewal or marker says nothing about a
        # lost lease then, only that the run is over. Its replies are dropped.
        for attempt in renew:
            reply = next(replies_iter)
            if isinstance(reply, NoScriptError) or not self._still_tracked(attempt):
                continue
            if isinstance(reply, Exception):
                self._renew_failed(attempt, reply)
            elif reply is None:
                self.report_lost(attempt, "the lease is held by another worker or expired")
            else:
                attempt.renewed_at_ms = now
                attempt.renew_failures = 0
        for attempt in watch:
            reply = next(replies_iter)
            if isinstance(reply, str) and reply and self._still_tracked(attempt):
                attempt.interrupt("canceled")
        for attempt, step in markers:
            reply = next(replies_iter)
            if not self._still_tracked(attempt):
                continue
            if isinstance(reply, list) and reply and reply[0] == "stale":
                self.report_lost(attempt, "a step marker was refused")
            elif not isinstance(reply, Exception):
                step.marked = True

    def _still_tracked(self, attempt: Attempt) -> bool:
        return self._attempts.get(id(attempt)) is attempt

    def _renew_failed(self, attempt: Attempt, exc: BaseException) -> None:
        attempt.renew_failures += 1
        if attempt.renew_failures >= MAX_RENEW_FAILURES:
            self.report_lost(attempt, f"{attempt.renew_failures} renewals failed ({exc})")

    def report_lost(self, attempt: Attempt, why: str) -> None:
        """The one place a lost lease is logged, counted and acted on (the
        keeper's refused renewals and markers, and an attempt's refused step
        record or settle), so that the warning and the metric mean exactly that."""
        if attempt.interrupted == "lease_lost":
            return  # reported once per attempt
        self.renewals_lost += 1
        self._observers.on_lease_lost(attempt.run_id)
        log.warning("lease lost for run %s: %s", attempt.run_id, why, extra=attempt.log_extra())
        attempt.interrupt("lease_lost")
