"""The worker's background loops: promoter, reaper and cron scheduler.

All three run on :class:`Loop`, which logs every failure, backs off
exponentially while Redis is unreachable (so a worker never spins when it
is down) and never dies silently.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import gevent
from gevent.event import Event
from redis.exceptions import NoScriptError, RedisError

from redflow.core import cron
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.idempotency import cron_fire_idempotency_key
from redflow.core.models import CronDef
from redflow.engine.claim import NOT_AN_ID, drop_invalid_entries
from redflow.engine.observers import Observers
from redflow.engine.rotation import Rotation
from redflow.engine.schedules import ScheduleTicker
from redflow.store.enqueue import enqueue
from redflow.store.port import Store
from redflow.store.targets import Targets

if TYPE_CHECKING:
    import redis

log = logging.getLogger("redflow.loops")

#: Processing lists a reaper pass scans (in turn over the worker's queues).
REAPER_QUEUES_PER_PASS = 3
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0
CRON_LOCK_MS = 3000
CRON_MAX_SLEEP_S = 1.0  # the leader's longest sleep (it renews its lock each pass)
CRON_FOLLOWER_S = 1.0  # how often another worker tries to lead
CRON_BATCH = 20


class Loop:
    """Runs ``step`` until stopped; ``step`` returns the seconds to sleep next.

    ``wake()`` cuts the current sleep short."""

    def __init__(self, name: str, step: Callable[[], float], stop: Event, *, on_noscript: Callable[[], None] | None = None) -> None:
        self.name = name
        self._step = step
        self._stop = stop
        self._on_noscript = on_noscript
        self._wake = Event()
        self.failures = 0
        self.greenlet: gevent.Greenlet | None = None

    def start(self) -> Loop:
        self.greenlet = gevent.spawn(self._run)
        self.greenlet.name = f"redflow-{self.name}"
        return self

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            try:
                delay = self._step()
                backoff = BACKOFF_MIN_S
                self.failures = 0
            except NoScriptError:
                # A cluster pipeline, or a promoted replica with an empty script cache.
                log.info("%s: scripts not loaded on the server; loading them", self.name)
                delay = 0.0
                if self._on_noscript is not None:
                    try:
                        self._on_noscript()
                    except RedisError as exc:
                        log.warning("%s: loading scripts failed (%s)", self.name, exc)
                        delay = backoff
            except RedisError as exc:
                self.failures += 1
                log.warning("%s: Redis error (%s); retrying in %.1fs", self.name, exc, backoff)
                delay, backoff = backoff, min(backoff * 2, BACKOFF_MAX_S)
            except Exception:
                self.failures += 1
                log.exception("%s failed; retrying in %.1fs", self.name, backoff)
                delay, backoff = backoff, min(backoff * 2, BACKOFF_MAX_S)
            if delay > 0 and not self._stop.is_set():
                self._wake.wait(delay)
            self._wake.clear()


class Reaper:
    """Runs in processing lists whose lease is gone go back to ready.

    A claimed run sits in processing for a moment before its lease is set,
    so only entries already there at the previous scan of their queue are
    checked: most runs come and go between two scans and cost the reaper
    nothing. A pass scans REAPER_QUEUES_PER_PASS queues in turn (not one
    command per queue per pass, for a worker of many idle queues), and every
    pass the queues whose processing list held entries at their last scan:
    a dead worker's run is checked again one pass after its queue's turn
    came, not a whole rotation later."""

    def __init__(self, store: Store, queues: list[str], interval_ms: int, observers: Observers | None = None) -> None:
        self.store = store
        self.queues = queues
        self.interval_s = interval_ms / 1000.0
        self._observers = observers or Observers()
        self._rotation = Rotation(queues, REAPER_QUEUES_PER_PASS)
        self._seen: dict[str, set[str]] = {}  # queue -> its processing entries at its last scan (none: not kept)
        self.recovered = 0

    def step(self) -> float:
        keys, store = self.store.keys, self.store
        turn = self._rotation.next()
        queues = turn + [queue for queue in self._seen if queue not in turn]  # in turn, and those holding entries
        pipe = store.pipeline()
        for queue in queues:
            pipe.lrange(keys.queue_processing(queue), 0, -1)
        scanned = dict(zip(queues, (set(ids) for ids in pipe.execute())))
        for queue in [queue for queue, ids in scanned.items() if any(NOT_AN_ID in run_id for run_id in ids)]:
            drop_invalid_entries(store, queue, who="reaper: ")
        lingering: list[tuple[str, str]] = []
        for queue, ids in scanned.items():
            ids = {run_id for run_id in ids if NOT_AN_ID not in run_id}
            lingering.extend((queue, run_id) for run_id in sorted(ids & self._seen.get(queue, set())))
            if ids:
                self._seen[queue] = ids
            else:
                self._seen.pop(queue, None)
        if not lingering:
            return self.interval_s
        check = store.pipeline()
        for queue, run_id in lingering:
            check.exists(keys.run_lease(run_id, queue))
        orphans = [entry for entry, leased in zip(lingering, check.execute()) if not leased]
        if orphans:
            self._requeue(orphans)
        return self.interval_s

    def _requeue(self, orphans: list[tuple[str, str]]) -> None:
        requeue = self.store.batch()
        for queue, run_id in orphans:
            self.store.scripts.reap_run(run_id=run_id, queue=queue, conn=requeue)
        per_queue: dict[str, int] = {}
        for (queue, _), moved in zip(orphans, requeue.execute()):
            if moved:
                per_queue[queue] = per_queue.get(queue, 0) + 1
        for queue, count in per_queue.items():
            self.recovered += count
            self._observers.on_recovered(queue, count)
            log.info("reaper: %d run(s) of dead workers returned to ready in %r", count, queue)


class CronScheduler:
    """Fires cron triggers and schedules (``engine/schedules.py``); one leader
    among all workers, by a renewed lock.

    Each fire starts a run with an idempotency key made of the cron id and
    its fire time, so a change of leader mid-fire cannot start it twice.
    The next time is computed from now: a worker that was down does not
    fire a burst of missed runs when it comes back."""

    def __init__(self, store: Store, targets: Targets) -> None:
        self.store = store
        self.targets = targets
        self.token = f"cronlock_{uuid.uuid4()}"
        self.is_leader = False
        self.schedules = ScheduleTicker(store, targets)

    def step(self) -> float:
        keys, redis = self.store.keys, self.store.redis
        if self.is_leader:
            self.is_leader = self.store.scripts.renew_cron_lock(token=self.token, lock_ms=CRON_LOCK_MS)
            if not self.is_leader:
                log.info("cron: this worker no longer leads the cron triggers and schedules")
        else:
            self.is_leader = bool(redis.set(keys.lock_cron(), self.token, nx=True, px=CRON_LOCK_MS))
            if self.is_leader:
                log.info("cron: this worker leads the cron triggers and schedules")
        if not self.is_leader:
            return CRON_FOLLOWER_S
        now_ms = self.store.now_ms()
        head = redis.zrange(keys.cron_next(), 0, 0, withscores=True)
        due: list[tuple[str, float]] = []
        if head and head[0][1] <= now_ms:  # (idle: the head is all a pass reads)
            due = redis.zrangebyscore(keys.cron_next(), "-inf", now_ms, start=0, num=CRON_BATCH, withscores=True)
        paused = redis.hmget(keys.cron_paused(), [cron_id for cron_id, _ in due]) if due else []
        for (cron_id, fire_ms), paused_at in zip(due, paused):
            if paused_at is not None:  # paused (cron pause) yet back on the schedule: take it off again
                redis.zrem(keys.cron_next(), cron_id)
                continue
            self._fire(redis, cron_id, int(fire_ms), now_ms)
        schedules_s = self.schedules.step()
        sleep_s = CRON_MAX_SLEEP_S if schedules_s is None else min(CRON_MAX_SLEEP_S, schedules_s)
        if due:
            head = redis.zrange(keys.cron_next(), 0, 0, withscores=True)
        if not head:
            return sleep_s
        due_ms: float = head[0][1]
        return min(sleep_s, max(0.01, (due_ms - self.store.now_ms()) / 1000.0))

    def _fire(self, redis: redis.Redis, cron_id: str, fire_ms: int, now_ms: int) -> None:
        keys = self.store.keys
        raw = redis.hget(keys.cron_def(), cron_id)
        try:
            if raw is None:
                raise CorruptDataError("no definition")
            definition = CronDef.from_json(str(raw))  # a str: every client decodes replies
            next_at = cron.next_fire_ms(definition.expression, definition.timezone, now_ms)
            run_input = self.store.payloads.loads(definition.input_json, what=f"cron {cron_id} inputJson")
        except RedflowError as exc:
            log.error("cron %s dropped: its definition is unusable (%s)", cron_id, exc)
            redis.zrem(keys.cron_next(), cron_id)
            return
        try:
            target, key = self.targets.resolve(definition.workflow), cron_fire_idempotency_key(cron_id, fire_ms)
            enqueue(self.store, self.targets.request(target, run_input, queue=definition.queue, idempotency_key=key))
        except RedflowError as exc:  # e.g. a workflow no worker has synced yet: keep the schedule
            log.error("cron %s could not start %r: %s", cron_id, definition.workflow, exc)
        redis.zadd(keys.cron_next(), {cron_id: next_at}, xx=True)

    def resign(self) -> None:
        """Give up leadership at once (worker stopping) so another worker takes over."""
        if self.is_leader:
            self.is_leader = False
            try:
                self.store.scripts.release_cron_lock(token=self.token)
            except RedisError as exc:  # the lock expires in 2 s anyway
                log.info("cron: could not release the leader lock (%s)", exc)
