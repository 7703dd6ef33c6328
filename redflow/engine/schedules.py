"""The cron leader's part of schedules as data: each due tick started once, or
skipped, and its schedule moved on to the next tick.

Invariant: a tick (schedule id, tick time) starts at most one run, and a
tick due while some worker leads starts one unless it was missed (no leader
reached it within the schedule's window) or the overlap policy skipped it.

- At most one: a tick's run is created under an idempotency key made of the
  schedule id and the tick time, which returns whatever run it names
  (``keep_existing``), and the key outlives the window in which the tick can
  still start (``ScheduleSpec.key_ttl_s``).
- Not lost: a tick leaves the next index only by ``schedule_tick.lua``, a
  compare-and-set on the tick time, after its run exists or it was skipped.
  A leader that dies in between leaves the tick due; the next leader finds
  the run under the tick's key, records it and moves on (it does not judge
  the tick again, so an overlap policy cannot skip a tick that started).
- Jitter is a hash of the schedule and the tick (``core/schedules.py``):
  every leader computes the same due time.
"""

from __future__ import annotations

import logging

from redflow.core.errors import RedflowError
from redflow.core.idempotency import schedule_tick_idempotency_key
from redflow.core.keys import TERMINAL_STATUSES
from redflow.core.models import Schedule
from redflow.core.schedules import Tick, next_tick, skip_missed
from redflow.store import reads
from redflow.store.cancel import cancel_run
from redflow.store.enqueue import enqueue
from redflow.store.port import Store
from redflow.store.requests import TickDone
from redflow.store.schedules import SCHEDULE_TAG
from redflow.store.targets import Target, Targets

log = logging.getLogger("redflow.schedules")

#: Due schedules handled per pass (one tick each); more are handled at once after.
TICK_BATCH = 20


class ScheduleTicker:
    """Fires the due ticks of schedules; the cron leader calls :meth:`step`."""

    def __init__(self, store: Store, targets: Targets) -> None:
        self.store = store
        self.targets = targets

    def step(self) -> float | None:
        """Handle the due ticks: seconds until the next one is due (0: more are
        due now), None when no schedule is active."""
        head = self.store.redis.zrange(self.store.keys.schedules_next(), 0, TICK_BATCH - 1, withscores=True)
        now_ms = self.store.now_ms()
        due = [str(schedule_id) for schedule_id, due_ms in head if due_ms <= now_ms]
        for schedule_id in due:
            self.tick(schedule_id, now_ms)
        if due:
            return 0.0
        return max(0.0, (head[0][1] - now_ms) / 1000.0) if head else None

    def tick(self, schedule_id: str, now_ms: int) -> None:
        """One due tick of one schedule: started, found started, or skipped; then the next tick."""
        keys = self.store.keys
        fields = self.store.redis.hgetall(keys.schedule(schedule_id))
        if not fields:  # deleted meanwhile: the script drops its next entry (unless it was created again)
            self._done(TickDone(schedule_id, None))
            return
        try:
            schedule = Schedule.from_hash(schedule_id, fields)
        except RedflowError as exc:  # written by hand: off the schedule (delete it; a create makes it anew)
            log.error("schedule %s taken off the schedule: %s", schedule_id, exc)
            self.store.redis.zrem(keys.schedules_next(), schedule_id)
            return
        if schedule.paused or schedule.next_tick_at is None or schedule.next_run_at is None:
            self._done(TickDone(schedule_id, None))  # a stray next entry: the script drops it
            return
        tick = Tick(round(schedule.next_tick_at * 1000), round(schedule.next_run_at * 1000))
        if tick.due_ms > now_ms:  # the index ran ahead of the hash: put it right
            self.store.redis.zadd(keys.schedules_next(), {schedule_id: tick.due_ms}, xx=True)
            return
        self._fire(schedule, tick, now_ms)

    def _fire(self, schedule: Schedule, tick: Tick, now_ms: int) -> None:
        done = TickDone(schedule.id, tick.tick_ms)
        try:
            following = self._judge(schedule, tick, done, now_ms)
            done.next_tick_ms, done.next_due_ms = following.tick_ms, following.due_ms
        except RedflowError as exc:  # croniter finds no tick after this one: nothing was started
            done.error = f"no next tick: {exc}"[:500]
            log.error("schedule %s taken off the schedule: %s (an update gives it a tick again)", schedule.id, exc)
        self._done(done)

    def _judge(self, schedule: Schedule, tick: Tick, done: TickDone, now_ms: int) -> Tick:
        """Start the tick's run, find it started, or skip it (into ``done``); the tick to move on to."""
        following = next_tick(schedule.id, schedule.spec, tick.tick_ms)
        target: Target | None = None
        try:
            target = self.targets.resolve(schedule.workflow)
            done.run_id = self._started_already(schedule.id, target, tick)
        except RedflowError as exc:
            done.error = str(exc)[:500]
        if done.run_id:  # a leader started it and died before moving on
            done.fired, done.run_at_ms = 1, now_ms
            log.info("schedule %s: the tick of %d had started run %s already; moving on", schedule.id, tick.tick_ms, done.run_id)
            return following
        missed, first_kept = skip_missed(schedule.id, schedule.spec, tick, now_ms)
        if missed:  # the tick and those after it up to the window: skipped; go on from the first in it
            done.skipped_late, done.error = missed, ""
            window_s = schedule.spec.window_ms / 1000
            log.warning("schedule %s: %d tick(s) missed (due more than %.0f s ago) skipped", schedule.id, missed, window_s)
            return first_kept
        if target is not None:
            self._start(schedule, target, tick, done, now_ms)
        else:
            log.error("schedule %s: tick of %d started no run: %s", schedule.id, tick.tick_ms, done.error)
        return following

    def _start(self, schedule: Schedule, target: Target, tick: Tick, done: TickDone, now_ms: int) -> None:
        """Start the tick's run unless the overlap policy says otherwise (the outcome goes into ``done``)."""
        unfinished = self._unfinished(schedule.last_run_id) if schedule.overlap != "allow" else None
        if unfinished is not None and schedule.overlap == "skip":
            done.skipped_overlap = 1
            log.info("schedule %s: tick of %d skipped, its last run %s is unfinished", schedule.id, tick.tick_ms, unfinished)
            return
        try:
            if unfinished is not None:  # cancel_running
                cancel_run(self.store, unfinished, f"schedule {schedule.id}: its next tick started (overlap=cancel_running)")
            value = self.store.payloads.loads(schedule.input_json, what=f"schedule {schedule.id!r} input")
            request = self.targets.request(
                target, value, idempotency_key=schedule_tick_idempotency_key(schedule.id, tick.tick_ms),
                idempotency_ttl_s=schedule.spec.key_ttl_s, tags={SCHEDULE_TAG: schedule.id}, keep_existing=True,
            )  # fmt: skip
            done.run_id, done.fired, done.run_at_ms = enqueue(self.store, request), 1, now_ms
        except RedflowError as exc:  # a workflow whose schema refuses the stored input now, ...
            done.error = str(exc)[:500]
            log.error("schedule %s: tick of %d started no run: %s", schedule.id, tick.tick_ms, exc)

    def _started_already(self, schedule_id: str, target: Target, tick: Tick) -> str:
        """The run the tick started already ("" if none): a leader died before moving on."""
        key = self.store.keys.idempotency(target.name, schedule_tick_idempotency_key(schedule_id, tick.tick_ms), target.queue)
        return str(self.store.redis.get(key) or "")

    def _unfinished(self, run_id: str | None) -> str | None:
        if not run_id:
            return None
        state = reads.read_state(self.store, run_id)
        return run_id if state is not None and state.status not in TERMINAL_STATUSES else None

    def _done(self, done: TickDone) -> None:
        self.store.scripts.schedule_tick(done)
