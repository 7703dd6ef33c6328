"""The gevent worker: lifecycle, consumer slots and the claim.

Each slot is a greenlet that loops: get work from the board (a run one of
the worker's claimers, one per queue, moved into processing, or a queue
known to hold runs: engine/claimer.py), execute one attempt, settle it (the
settle claims the slot's next run of the same queue). An idle slot waits on
the board without a connection of its own; a busy one sends its commands on
a connection it shares with other slots. Beside the slots run the claimers,
the lease keeper, the promoter, the reaper, the sweepers and the cron scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import gevent
from gevent import monkey
from gevent.event import Event

from redflow.client import RedflowClient, set_default_client
from redflow.core.errors import RedflowError
from redflow.core.keys import new_id
from redflow.core.models import ARRAY_RECORDS, OBJECT_RECORDS
from redflow.core.retention import Retention
from redflow.core.version import VERSION
from redflow.core.workflow_def import Registry, get_default_registry
from redflow.engine.attempt import Attempt, Runtime
from redflow.engine.board import Board
from redflow.engine.claim import SlotClaimer
from redflow.engine.claimer import Claimers
from redflow.engine.decide import Outcome
from redflow.engine.heartbeat import DEFAULT_BEAT_S, Heartbeat, WorkerStatus
from redflow.engine.interrupts import WORKER_STOPPED
from redflow.engine.lease import LeaseKeeper
from redflow.engine.limits import FlowSweeper, limited_names
from redflow.engine.loops import CronScheduler, Loop, Reaper
from redflow.engine.observers import Observers, global_observers
from redflow.engine.outcome_log import log_outcome
from redflow.engine.parking import ScheduledEvents
from redflow.engine.promoter import Promoter
from redflow.engine.retention import RetentionCleaner
from redflow.engine.slot import Slot
from redflow.engine.sweeper import OrphanSweeper
from redflow.store.connection import create_redis, resolve_default_retention, resolve_interop, resolve_prefix, resolve_refuse_evicting
from redflow.store.memory import check_eviction_policy
from redflow.store.mux_connection import Connection, shared_connections
from redflow.store.port import Store
from redflow.store.slot_connection import slot_connection, unblock_clients
from redflow.store.targets import Targets

log = logging.getLogger("redflow.worker")

WATCHDOG_INTERVAL_S = 1.0
REGISTRY_CHECK_S = 10.0
#: After the stop timeout, how long interrupted runs get to unwind and release their leases.
STOP_GRACE_S = 3.0


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """Every tuning knob of a worker, in one place."""

    queues: tuple[str, ...] = ()  # empty: the queues of the registry's workflows
    concurrency: int = 1
    lease_ms: int = 5000
    blmove_timeout_s: float = 1.0
    reaper_interval_ms: int = 500
    cancel_poll_ms: int = 100
    sweep_interval_s: float = 5.0
    cron: bool = True
    #: Retention of runs of workflows that stored none; None: $REDFLOW_RUN_RETENTION_DAYS or the default.
    default_retention: Retention | None = None
    clean_retention: bool = True  # run the retention cleaner (one worker at a time cleans)
    retention_interval_s: float = 5.0
    #: Refuse to start on a Redis that may evict; None: $REDFLOW_REFUSE_EVICTING_REDIS.
    refuse_evicting_redis: bool | None = None
    #: Slots share a few pipelined connections (False: one connection per slot, as before 0.2).
    share_connections: bool = True
    heartbeat_s: float = DEFAULT_BEAT_S  # the worker record, queue depth samples and chart tallies

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise RedflowError("concurrency must be >= 1")
        if not self.heartbeat_s >= 0.05:
            raise RedflowError("heartbeat_s must be >= 0.05")
        if self.lease_ms < 100:
            raise RedflowError("lease_ms must be >= 100")
        if self.blmove_timeout_s <= 0:
            raise RedflowError("blmove_timeout must be > 0")


class Worker:
    """A running worker; see :func:`start_worker`."""

    def __init__(
        self,
        *,
        client: RedflowClient,
        registry: Registry,
        options: WorkerOptions,
        owns_client: bool = False,
        observers: Iterable[Any] = (),
    ) -> None:
        self.client = client
        self.observers = Observers([*observers, *global_observers()])
        self.registry = registry
        self.options = options
        scoped = client.store.interop.queue  # an app name scopes the queues, as the asyncio package's worker does
        self.queues = list(dict.fromkeys(scoped(queue) for queue in options.queues or registry.queues()))
        self._owns_client = owns_client
        self._stopping = Event()
        self._loops_stop = Event()
        self._stopped = Event()
        self._drained = Event()
        self._started = False
        self._is_default_client = False
        self._slots: list[gevent.Greenlet] = []
        self._slot_conns: list[Connection] = []
        self._inflight: set[Attempt] = set()
        self._loops: list[Loop] = []
        self.stats: dict[str, int] = dict.fromkeys(("succeeded", "failed", "retried", "canceled", "parked", "abandoned", "skipped"), 0)
        self.store = store = client.store  # the engine's port to Redis; handlers get ``client``, over it
        self.id = new_id("worker")
        self._add_roles(store, client.targets)
        limited = limited_names(registry)
        self.claimer = SlotClaimer(store, options, limited=limited, observers=self.observers)
        self.board = Board(self.queues, options.concurrency)
        redis = store.redis
        self.claimers = Claimers(
            self.board,
            store.keys,
            self.queues,
            lambda: slot_connection(redis),
            lambda blocked: unblock_clients(redis, blocked),
            self.claimer,
            timeout_s=options.blmove_timeout_s,
        )
        self.runtime = Runtime(
            store=store,
            client=client,
            registry=registry,
            queues=frozenset(self.queues),
            lease_ms=options.lease_ms,
            keeper=self.keeper,
            spawn_attempt=lambda attempt: gevent.spawn(self._run_attempt, attempt),
            stopping=self._stopping.is_set,
            wake_promoter=self.promoter.wake_for,
            observe=self._observe,
            observers=self.observers,
            limited=limited,
            step_form=ARRAY_RECORDS if store.interop.array_steps else OBJECT_RECORDS,
        )

    def _add_roles(self, store: Store, targets: Targets) -> None:
        """The background roles beside the slots, each working through the store."""
        options, observers = self.options, self.observers
        self.keeper = LeaseKeeper(
            store.scripts, lease_ms=options.lease_ms, now_ms=store.now_ms, tick_ms=options.cancel_poll_ms, observers=observers
        )
        self.promoter = Promoter(store, self.queues)
        self.reaper = Reaper(store, self.queues, options.reaper_interval_ms, observers=observers)
        self.sweeper = OrphanSweeper(store, self.queues, interval_s=options.sweep_interval_s, observers=observers)
        self.flow_sweeper = FlowSweeper(store, self.queues, interval_s=options.sweep_interval_s)
        self.cron = CronScheduler(store, targets)
        retention = resolve_default_retention(options.default_retention)
        self.retention = RetentionCleaner(store, default=retention, interval_s=options.retention_interval_s)
        known, beat_s = self.registry.__contains__, options.heartbeat_s
        self.heartbeat = Heartbeat(
            store, self.id, self.queues, options.concurrency, self._status, known=known, beat_s=beat_s, version=VERSION
        )
        self.scheduled_events = ScheduledEvents(store, claim_ms=options.lease_ms)

    def __repr__(self) -> str:
        return f"Worker(queues={self.queues}, concurrency={self.options.concurrency}, in_flight={self.in_flight})"

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @property
    def running(self) -> bool:
        return self._started and not self._stopped.is_set()

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> Worker:
        if self._started:
            return self
        check_eviction_policy(self.store.redis, refuse=resolve_refuse_evicting(self.options.refuse_evicting_redis))
        self.client.sync_registry(self.registry)
        self.store.scripts.load_all()  # once, instead of a NOSCRIPT per slot on a fresh Redis
        if not self.queues:
            log.warning("worker has no queues: its registry defines no workflows")
        self._started = True
        # Workflow.run() without a client, inside handlers, talks to this worker's Redis.
        self._is_default_client = set_default_client(self.client, only_if_unset=True)
        self.keeper.start()
        reload = self.store.scripts.load_all
        self.promoter.loop = Loop("promoter", self.promoter.step, self._loops_stop, on_noscript=reload).start()
        self._loops = [
            self.promoter.loop,
            Loop("reaper", self.reaper.step, self._loops_stop, on_noscript=reload).start(),
            Loop("sweeper", self.sweeper.step, self._loops_stop, on_noscript=reload).start(),
            Loop("limits", self.flow_sweeper.step, self._loops_stop, on_noscript=reload).start(),
            Loop("watchdog", self._watch_connections, self._loops_stop).start(),
            Loop("registry", self._resync_if_lost, self._loops_stop).start(),
            Loop("scheduled-events", self.scheduled_events.step, self._loops_stop, on_noscript=reload).start(),
        ]
        if self.board.limit is not None:
            self._loops.append(Loop("queue-limit", self.board.limit.step, self._loops_stop).start())
        self.heartbeat.loop = Loop("heartbeat", self.heartbeat.step, self._loops_stop).start()
        self._loops.append(self.heartbeat.loop)
        if self.options.cron:
            self._loops.append(Loop("cron", self.cron.step, self._loops_stop, on_noscript=reload).start())
        if self.options.clean_retention:
            self._loops.append(Loop("retention", self.retention.step, self._loops_stop, on_noscript=reload).start())
        # Slots share a few pipelined connections for their calls (store/mux_connection.py;
        # TLS: one each); the claimers block, one connection per queue. All open at their first command.
        shared = shared_connections(self.store.redis, self.options.concurrency) if self.options.share_connections else []
        self._slot_conns.extend(shared)
        for index in range(self.options.concurrency):
            conn = shared[index % len(shared)] if shared else slot_connection(self.store.redis)
            if not shared:
                self._slot_conns.append(conn)
            loop = Slot(index, conn, board=self.board, claimer=self.claimer, runtime=self.runtime,
                        run_attempt=self._run_attempt, stopping=self._stopping)  # fmt: skip
            slot = gevent.spawn(loop.run)
            slot.name = f"redflow-slot-{index}"
            self._slots.append(slot)
        self._slot_conns.extend(claimer.conn for claimer in self.claimers.claimers)
        self.claimers.start()
        log.info("worker started: queues=%s concurrency=%d prefix=%s", self.queues, self.options.concurrency, self.client.prefix)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming, wait up to ``timeout`` s for runs in flight, then leave
        the rest unfinalized (their leases are released, so another worker
        resumes them, replaying finished steps)."""
        if not self._started or self._stopped.is_set():
            return
        self._stopping.set()
        if self.heartbeat.loop is not None:
            self.heartbeat.loop.wake()  # its record says "stopping" while runs drain
        self.claimers.stop()  # idle slots get "nothing" from the board at once and leave
        if self._inflight:
            self._drained.clear()
            self._drained.wait(timeout)
        leftover = list(self._inflight)
        if leftover:
            log.warning("stop: %d run(s) still going after %.1fs; leaving them to another worker", len(leftover), timeout)
            for attempt in leftover:
                attempt.interrupt(WORKER_STOPPED)
        gevent.joinall(self._slots, timeout=STOP_GRACE_S)
        gevent.killall([s for s in self._slots if not s.dead], block=True, timeout=1)
        self._loops_stop.set()
        for loop in self._loops:
            loop.wake()
        gevent.joinall([loop.greenlet for loop in self._loops if loop.greenlet is not None], timeout=2)
        self.cron.resign()
        self.retention.stop()
        self.heartbeat.goodbye()
        self.keeper.stop()
        for conn in self._slot_conns:
            conn.close()
        if self._is_default_client:
            set_default_client(None)
        if self._owns_client:
            self.client.close()
        self._stopped.set()
        log.info("worker stopped: %s", self.stats)

    def join(self, timeout: float | None = None) -> bool:
        """Block until the worker has stopped; returns whether it has."""
        return bool(self._stopped.wait(timeout))

    # -- slots ----------------------------------------------------------------
    def _resync_if_lost(self) -> float:
        """Sync the registry again when its metadata vanished from Redis (a
        Redis restarted without persistence): clients find workflows by name
        and the cron scheduler its triggers there."""
        names = [wf.name for wf in self.registry.list()]
        if names:  # one command: the set of synced names goes with the metadata (a flushed Redis loses both)
            if not all(self.store.redis.smismember(self.store.keys.workflows(), names)):
                log.warning("workflow metadata is gone from Redis (restarted without persistence?); syncing the registry again")
                self.client.sync_registry(self.registry)
        return REGISTRY_CHECK_S

    def _watch_connections(self) -> float:
        """Abort slot commands that wait past their deadline (a Redis that hangs)."""
        now = time.monotonic()
        for conn in self._slot_conns:
            if conn.overdue(now):
                log.warning("a slot's Redis command is overdue; dropping its connection")
                conn.abort()
        return WATCHDOG_INTERVAL_S

    def _run_attempt(self, attempt: Attempt) -> Attempt | None:
        """Run one attempt; returns the attempt of the next run its settle claimed,
        counted in flight before this one leaves (a graceful stop waits for both)."""
        self._inflight.add(attempt)
        try:
            attempt.execute()
            return Attempt(self.runtime, attempt.conn, attempt.next_claim) if attempt.next_claim is not None else None
        finally:
            self._inflight.discard(attempt)
            # The slot goes on to the next run without yielding: not drained yet.
            if not self._inflight and attempt.next_claim is None:
                self._drained.set()

    def _status(self) -> WorkerStatus:
        """What the heartbeat record says about this worker now."""
        stats = self.stats
        running = tuple((a.run_id, a.info.workflow) for a in self._inflight)
        return WorkerStatus(
            busy=len(running),
            done=stats["succeeded"] + stats["failed"] + stats["canceled"],
            failed=stats["failed"],
            stopping=self._stopping.is_set(),
            running=running,
        )

    def _observe(self, attempt: Attempt, outcome: Outcome) -> None:
        self.stats[outcome.kind] += 1
        self.heartbeat.count(attempt, outcome)
        log_outcome(attempt, outcome)


def _require_gevent_patching() -> None:
    if not monkey.is_module_patched("socket"):
        raise RedflowError(
            "start_worker needs gevent monkey patching: call gevent.monkey.patch_all() first thing (the redflow-gevent command does)"
        )


def start_worker(
    registry: Registry | None = None,
    url: str | None = None,
    redis: Any = None,
    prefix: str | None = None,
    queues: list[str] | tuple[str, ...] | None = None,
    concurrency: int = 1,
    lease_ms: int = 5000,
    blmove_timeout: float = 1.0,
    reaper_interval_ms: int = 500,
    *,
    cancel_poll_ms: int = 100,
    sweep_interval_s: float = 5.0,
    cron: bool = True,
    observers: Iterable[Any] = (),
    cluster: bool = False,
    default_retention: Retention | None = None,
    clean_retention: bool = True,
    retention_interval_s: float = 5.0,
    refuse_evicting_redis: bool | None = None,
    share_connections: bool = True,
    heartbeat_s: float = DEFAULT_BEAT_S,
    app: str | None = None,
    blob_threshold: int | None = None,
    compat: str | None = None,
) -> Worker:
    """Start a worker for ``registry`` (default: the default registry) and return it.
    ``app``, ``blob_threshold`` and ``compat``: as :func:`~redflow.client.create_client`'s
    (sharing Redis with the asyncio ``redflow`` 0.1.x: docs/interop.md)."""
    _require_gevent_patching()
    registry = registry if registry is not None else get_default_registry()
    options = WorkerOptions(
        queues=tuple(queues or ()),
        concurrency=concurrency,
        lease_ms=lease_ms,
        blmove_timeout_s=blmove_timeout,
        reaper_interval_ms=reaper_interval_ms,
        cancel_poll_ms=cancel_poll_ms,
        sweep_interval_s=sweep_interval_s,
        cron=cron,
        default_retention=default_retention,
        clean_retention=clean_retention,
        retention_interval_s=retention_interval_s,
        refuse_evicting_redis=refuse_evicting_redis,
        share_connections=share_connections,
        heartbeat_s=heartbeat_s,
    )
    settings = resolve_interop(app, blob_threshold, compat)
    if redis is not None:  # (its eviction policy is checked when the worker starts)
        client, owned = RedflowClient(redis, prefix=prefix, registry=registry, interop=settings), False
    else:
        # Waits for child results and step I/O take pool connections besides the slots' own.
        pool_size = max(100, 2 * concurrency + 16)
        base = create_redis(url, max_connections=pool_size, cluster=cluster)
        client, owned = RedflowClient(base, prefix=resolve_prefix(prefix), registry=registry, owns_redis=True, interop=settings), True
    try:
        return Worker(client=client, registry=registry, options=options, owns_client=owned, observers=observers).start()
    except BaseException:
        if owned:
            client.close()
        raise
