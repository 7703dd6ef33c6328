"""The client: start runs, wait for them, read, list and cancel them, emit events.

Plain blocking redis-py, cooperative under gevent's monkey patching; one client
serves every greenlet. It is the public API over a :class:`~redflow.store.port.Store`:
the work is done in ``store/`` (``enqueue``, ``reads``, ``children``, ``events``,
``signals``, ``streams``, ``bulk``, ``purge``, ``run_search``), which a worker's engine uses too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from redflow.core.errors import RedflowError, RunNotFoundError
from redflow.core.interop import NONE, Interop
from redflow.core.keys import RUN_STATUSES
from redflow.core.models import EventDef, Run, Step
from redflow.core.models.streams import StreamItem
from redflow.core.run_state import RunState
from redflow.core.tags import validate_tags
from redflow.core.workflow_def import Registry, WorkflowDef, get_default_registry
from redflow.handle import RunHandle
from redflow.store import bulk, children, events, reads, signals, streams
from redflow.store.cancel import cancel_run, run_target
from redflow.store.connection import close_redis, create_redis, resolve_interop, resolve_prefix
from redflow.store.enqueue import enqueue, enqueue_many
from redflow.store.memory import check_eviction_policy_once
from redflow.store.port import Store
from redflow.store.purge import PurgeQuery, purge_finished
from redflow.store.requests import IDEMPOTENCY_TTL_S, EnqueueRequest
from redflow.store.run_search import RunFilter, RunList
from redflow.store.schedules import Schedules
from redflow.store.targets import Target, Targets
from redflow.sync import sync_registry


class RedflowClient:
    """Talks to one Redis under one prefix; see the client guide (docs/guide/client.md) for what it promises.

    ``store``: the :class:`~redflow.store.port.Store` to work through (a worker
    builds its handlers' client over its own); else one over ``redis``, ``prefix`` and ``interop``."""

    def __init__(
        self,
        redis: Any = None,
        *,
        prefix: str | None = None,
        registry: Registry | None = None,
        owns_redis: bool = False,
        store: Store | None = None,
        interop: Interop = NONE,
    ) -> None:
        if store is None:
            store = Store(create_redis(redis_client=redis), resolve_prefix(prefix), interop=interop)
        self.store = store
        self.redis, self.prefix, self.keys, self.scripts = store.redis, store.prefix, store.keys, store.scripts
        self.clock, self.search = store.clock, store.search
        self.registry = registry
        self.targets = Targets(store.redis, store.keys, store.payloads, registry, store.interop)
        #: Schedules as data: create, update, pause, resume, trigger, delete, list (``store/schedules.py``).
        self.schedules: Schedules[RunHandle] = Schedules(store, self.targets, lambda run_id: RunHandle(self, run_id))
        self._owns_redis = owns_redis or (redis is not None and store.redis is not redis)

    def __repr__(self) -> str:
        return f"RedflowClient(prefix={self.prefix!r})"

    def __enter__(self) -> RedflowClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_redis:
            close_redis(self.redis)

    def now_ms(self) -> int:
        """Redis's time in epoch ms: the clock every stored time and due time is read from."""
        return self.store.now_ms()

    @property
    def workflow_meta_ttl_s(self) -> float:
        """How long ``run("name")`` reuses a workflow's synced metadata (see ``store/targets.py``)."""
        return self.targets.meta_ttl_s

    @workflow_meta_ttl_s.setter
    def workflow_meta_ttl_s(self, seconds: float) -> None:
        self.targets.meta_ttl_s = seconds

    # -- starting runs -----------------------------------------------------
    def resolve_workflow(self, workflow: WorkflowDef | str) -> Target:
        """Name, queue and attempts of a workflow: the local registry first, else its synced metadata."""
        return self.targets.resolve(workflow)

    def run(
        self,
        workflow: WorkflowDef | str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float | None = None,
        run_at: float | None = None,
        max_attempts: int | None = None,
        parent_run_id: str | None = None,
        idempotency_ttl: int = IDEMPOTENCY_TTL_S,
        tags: Mapping[str, str] | None = None,
        priority: int = 0,
    ) -> RunHandle:
        """Start a run of ``workflow`` (a name or a ``Workflow``); same
        ``idempotency_key`` => same run, never enqueued twice. ``tags``: a few
        ``str -> str`` pairs to find the run by (``list_runs(tags=...)``).
        ``priority`` 0..9: within its queue, a waiting run of higher priority starts first."""
        target = self.targets.resolve(workflow)
        request = self.targets.request(
            target,
            input,
            queue=queue,
            max_attempts=max_attempts,
            priority=priority,
            idempotency_key=idempotency_key,
            idempotency_ttl_s=idempotency_ttl,
            parent_run_id=parent_run_id or "",
            tags=validate_tags(tags) or None,
            available_at_ms=self._available_at_ms(delay, run_at),
        )
        return RunHandle(self, enqueue(self.store, request))

    def run_many(
        self,
        workflow: WorkflowDef | str,
        inputs: Iterable[Any],
        *,
        queue: str | None = None,
        batch: int = 500,
        priority: int = 0,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunHandle]:
        """Start many runs of one workflow, one pipelined round trip per ``batch`` runs (no idempotency
        keys, no delays): bulk loads and benches. ``tags``: each run's, as for :meth:`run`. A list or tuple
        of inputs is checked whole before the first batch (a refused input starts no run); other iterables
        are read as they go."""
        target, tags = self.targets.resolve(workflow), validate_tags(tags) or None
        requests: Iterable[EnqueueRequest] = (
            self.targets.request(target, raw, queue=queue, priority=priority, tags=tags) for raw in inputs
        )
        if isinstance(inputs, (list, tuple)):
            requests = list(requests)
        return [RunHandle(self, run_id) for run_id in enqueue_many(self.store, requests, batch=batch)]

    def _available_at_ms(self, delay: float | None, run_at: float | None) -> int:
        """When a run may start, in Redis's clock (0: now): ``delay`` counts from Redis's now."""
        if delay is not None and run_at is not None:
            raise RedflowError("give delay= or run_at=, not both")
        if delay is not None:
            return self.now_ms() + int(delay * 1000)
        if run_at is not None:
            return int(run_at * 1000)
        return 0

    # -- where runs live ---------------------------------------------------
    def list_children(self, run_id: str) -> list[str]:
        """Ids of the runs started with ``run_id`` as their parent, oldest first
        (ids whose run is gone are left out)."""
        return self.store.locator.children(run_id)

    def queue_of(self, run_id: str) -> str | None:
        """The queue of a run, or ``None`` if there is no such run."""
        return self.store.locator.queue_of(run_id)

    def known_queues(self) -> list[str]:
        """Queues named by synced workflows and triggers, and (cluster mode) every queue that has had runs
        (outside cluster mode, not a queue only a ``run(queue=...)`` used: see ``store/reads.py``)."""
        return reads.known_queues(self.store)

    # -- reading runs ------------------------------------------------------
    def read_state(self, run_id: str, *, watch: bool = False) -> RunState | None:
        """Status and result of a run; with ``watch``, an unfinished run is also
        flagged as waited for, so that whoever finishes it wakes its waiters."""
        return reads.read_state(self.store, run_id, watch=watch)

    def wait_for(self, run_id: str, *, timeout: float = 30.0, assist: Any = None) -> RunState:
        """Block until the run is terminal (see ``store/reads.py``); ``TimeoutError``
        after ``timeout`` seconds. ``assist(state) -> bool`` may run a pending run itself."""
        return reads.wait_for(self.store, run_id, timeout_s=timeout, assist=assist)

    def get_handle(self, run_id: str) -> RunHandle:
        """A handle for a stored run (``result``, ``status``, ``cancel``...); :class:`RunNotFoundError` if there is none."""
        if not isinstance(run_id, str) or not run_id or self.read_state(run_id) is None:
            raise RunNotFoundError(str(run_id))
        return RunHandle(self, run_id)

    def get_run(self, run_id: str) -> Run | None:
        return reads.get_run(self.store, run_id)

    def get_steps(self, run_id: str) -> list[Step]:
        return reads.get_steps(self.store, run_id)

    def get_progress(self, run_id: str) -> Any:
        """The latest value run ``run_id`` gave ``ctx.progress``, or ``None``."""
        return reads.get_progress(self.store, run_id)

    def read_stream(self, run_id: str, *, after: str | None = None, limit: int = 100) -> list[StreamItem]:
        """Up to ``limit`` (1..1000) items of the run's output stream after item id ``after``
        (None: from the first), oldest first: ``(id, value)`` pairs with ``.attempt``."""
        return streams.read_page(self.store, run_id, after=after, limit=limit)

    def follow_stream(self, run_id: str, *, after: str | None = None, timeout: float | None = None) -> Iterator[StreamItem]:
        """The run's stream items, live, until the run ends (see ``RunHandle.stream``)."""
        return streams.follow(self.store, run_id, after=after, timeout=timeout)

    def count_runs(self, status: str) -> int:
        """How many runs are in ``status`` (all queues)."""
        _check_status(status)
        return self.status_counts((status,))[status]

    def status_counts(self, statuses: Iterable[str] = RUN_STATUSES) -> dict[str, int]:
        """How many runs are in each status (all queues), in one round trip."""
        return reads.status_counts(self.store, statuses, reads.index_queues(self.store))

    def list_runs(
        self,
        workflow: str | None = None,
        status: str | None = None,
        limit: int = 100,
        *,
        tags: Mapping[str, str] | None = None,
        cursor: str | None = None,
    ) -> RunList:
        """Runs matching every filter given, newest first, answered from indexes
        (``store/run_search.py``). A page does bounded work, so it may hold fewer
        than ``limit`` runs while more match further back: then ``.cursor`` of
        the returned list is not None; pass it as ``cursor=`` for the next page.
        Runs whose hash is gone are skipped; a corrupt one raises."""
        return self.search.page(RunFilter.of(workflow, status, tags), reads.index_queues(self.store), limit=limit, cursor=cursor)

    def count_matching(self, workflow: str | None = None, status: str | None = None, *, tags: Mapping[str, str] | None = None) -> int:
        """How many runs match (an index's size, or a bounded-batch walk)."""
        return self.search.count(RunFilter.of(workflow, status, tags), reads.index_queues(self.store))

    # -- cancel and retry -----------------------------------------------------
    def cancel(self, run_id: str, reason: str | None = None) -> bool:
        """Cancel a run: ``True`` if it is canceled now or its worker was told
        to stop it; ``False`` if it already ended or does not exist. Its
        unfinished children are canceled too, recursively (also those of a run
        canceled already: a cancel whose caller died before its cascade is
        finished by the next)."""
        return cancel_run(self.store, run_id, reason)

    def retry(self, run_id: str) -> bool:
        """Run a failed or canceled run again under the same id: its succeeded
        steps replay, and it gets a fresh attempt budget. ``False`` if the
        run is missing or not failed/canceled."""
        target = run_target(self.store, run_id)
        if target is None:
            return False
        queue, index_keys = target
        return self.scripts.retry_run(run_id=run_id, queue=queue, now_ms=self.now_ms(), index_keys=index_keys).accepted

    def retry_many(self, workflow: str | None = None, status: str | None = "failed", tags: Mapping[str, str] | None = None) -> int:
        """Retry every run that matches (``status`` failed, canceled, or None for
        both), in bounded batches, each at most once; returns how many were retried."""
        self.store.load_scripts_for_batches()
        return bulk.retry_many(self.search, RunFilter.of(workflow, status, tags), reads.index_queues(self.store), self.now_ms)

    def cancel_many(
        self,
        workflow: str | None = None,
        status: str | None = "queued",
        tags: Mapping[str, str] | None = None,
        *,
        reason: str | None = None,
    ) -> int:
        """Cancel every unfinished run that matches (``status`` scheduled, queued,
        running, or None for all three); finished runs are left alone. Returns
        how many were canceled or (running) told to stop. Their unfinished
        children are canceled too, as by ``cancel``."""
        self.store.load_scripts_for_batches()
        return bulk.cancel_many(
            self.search,
            RunFilter.of(workflow, status, tags),
            reads.index_queues(self.store),
            self.now_ms,
            reason,
            then=lambda run_ids: children.cancel_descendants(self.store, run_ids, reason=reason),
        )

    # -- retention: deleting finished runs -----------------------------------
    def purge(self, older_than: float | timedelta, status: str | None = None, workflow: str | None = None, *, dry_run: bool = False) -> int:
        """Delete finished runs (hash, steps, index entries) that ended at least
        ``older_than`` seconds ago, only of ``status`` / ``workflow`` when given,
        in bounded batches. Live runs are never touched, nor the children of a
        run that is unfinished (its replay reads them). Returns how many runs
        were deleted (with ``dry_run``, how many would be)."""
        query = PurgeQuery.of(self.now_ms(), older_than, status, workflow)
        return purge_finished(self.scripts, self.redis, query, reads.index_queues(self.store), dry_run=dry_run)

    # -- events (store/events.py) ---------------------------------------------
    def event_subscribers(self, event: str) -> list[EventDef]:
        return events.subscribers(self.store, event)

    def emit_event(self, name: str, payload: Any = None, idempotency_key: str | None = None) -> list[str]:
        """Start one run per workflow subscribed to ``name``, and resume the runs
        waiting for it (``step.wait_for_event``) whose match the payload
        satisfies; returns the ids of the runs started."""
        return events.fan_out(self.store, self.targets, name, payload, idempotency_key=idempotency_key)

    def schedule_event(self, name: str, payload: Any = None, at: float | None = None, idempotency_key: str | None = None) -> list[str]:
        """Like :meth:`emit_event`, with the runs starting at unix time ``at``;
        runs waiting for the event at that time get it then (a worker delivers it)."""
        if at is None:
            raise RedflowError("schedule_event needs at= (unix seconds)")
        return events.fan_out(self.store, self.targets, name, payload, idempotency_key=idempotency_key, at_ms=int(at * 1000))

    def signal(self, run_id: str, name: str, payload: Any = None) -> bool:
        """Send signal ``name`` with ``payload`` (JSON) to run ``run_id``: kept until its
        ``step.wait_for_signal(name)`` takes it (one per wait, in the order sent). False,
        storing nothing, when the run has ended or does not exist (store/signals.py)."""
        return signals.send(self.store, run_id, name, payload)

    # -- registry ----------------------------------------------------------
    def sync_registry(self, registry: Registry | None = None) -> None:
        """Store workflow metadata and cron / event triggers in Redis; drop stale triggers."""
        sync_registry(self.store, registry if registry is not None else get_default_registry())
        self.targets.forget()  # this client sees what it just stored at once


_STATUS_SET = frozenset(RUN_STATUSES)


def _check_status(status: str) -> None:
    if status not in _STATUS_SET:
        raise RedflowError(f"unknown run status {status!r}")


def create_client(
    url: str | None = None,
    *,
    redis: Any = None,
    prefix: str | None = None,
    registry: Registry | None = None,
    cluster: bool = False,
    max_connections: int | None = None,
    app: str | None = None,
    blob_threshold: int | None = None,
    compat: str | None = None,
) -> RedflowClient:
    """A client for ``url`` (default ``REDIS_URL`` or local; ``redis+cluster://`` and
    ``redis+sentinel://`` URLs work, as does ``cluster=True``) or an existing
    redis-py ``Redis`` / ``RedisCluster``. It pools up to ``max_connections``
    (default 128, per node on a cluster); past that, greenlets wait for a free one. ``app``
    (default ``$REDFLOW_APP``), ``blob_threshold``, ``compat``: sharing Redis with the asyncio redflow (docs/interop.md)."""
    settings = resolve_interop(app, blob_threshold, compat)
    base = redis if redis is not None else create_redis(url, cluster=cluster, max_connections=max_connections)
    client = RedflowClient(base, prefix=prefix, registry=registry, owns_redis=redis is None, interop=settings)
    check_eviction_policy_once(client.redis)  # an ERROR naming the fix when Redis may evict runs
    return client


_default_client: RedflowClient | None = None


def get_default_client() -> RedflowClient:
    """The process-wide client ``Workflow.run`` uses when given none."""
    global _default_client
    if _default_client is None:
        _default_client = create_client()
    return _default_client


def set_default_client(client: RedflowClient | None, *, only_if_unset: bool = False) -> bool:
    """Set the client ``Workflow.run`` uses by default; returns whether it was set."""
    global _default_client
    if only_if_unset and _default_client is not None:
        return False
    _default_client = client
    return True
