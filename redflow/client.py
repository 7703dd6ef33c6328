"""The client: start runs, wait for them, read, list and cancel them, emit events.

Everything is plain blocking redis-py; under gevent's monkey patching every
call is cooperative. One client is safe to share between greenlets.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from redflow import client_events, client_waits, enqueue_hooks
from redflow.core import codec
from redflow.core.errors import (
    InputValidationError,
    RedflowError,
    RunNotFoundError,
    SerializationError,
    TimeoutError,
    UnknownWorkflowError,
)
from redflow.core.flow import check_priority, limits_spec
from redflow.core.keys import RUN_STATUSES, Keys, new_id
from redflow.core.models import EventDef, EventWaiter, Run, RunField, Step, WorkflowField, max_attempts_of
from redflow.core.retention import FINISHED_STATUSES, duration_s
from redflow.core.tags import tags_json, validate_tags
from redflow.handle import STATE_FIELDS, RunHandle, RunState
from redflow.registry import Registry, Workflow, get_default_registry
from redflow.store import bulk, event_waiters
from redflow.store.batch import Batch
from redflow.store.connection import close_redis, create_redis, is_cluster, resolve_prefix
from redflow.store.memory import check_eviction_policy_once, raise_when_full
from redflow.store.purge import PurgeQuery, purge_finished
from redflow.store.run_search import Entry, RunFilter, RunList, RunSearch
from redflow.store.scripts import Enqueued, Scripts
from redflow.store.server_clock import ServerClock

IDEMPOTENCY_TTL_S = 7 * 24 * 3600
#: How long ``run("name")`` reuses a workflow's synced metadata (queue, max
#: attempts) before reading it again, so that an enqueue is one round trip.
#: Safe: the metadata only chooses where a new run waits and its attempt
#: budget, both fixed at enqueue; a deploy that changes them is seen within
#: this time, which only widens the window a deploy has anyway (runs enqueued
#: just before it keep the old values). An unknown name is never cached.
WORKFLOW_META_TTL_S = 5.0
_WAIT_SLICE_MIN_S = 0.05
_WAIT_SLICE_MAX_S = 1.0


def new_run_id() -> str:
    return new_id("run")


@dataclass(frozen=True, slots=True)
class _Target:
    """What the client needs to know about a workflow to enqueue it."""

    name: str
    queue: str
    max_attempts: int
    workflow: Workflow | None


class RedflowClient:
    """Talks to one Redis under one prefix; see docs/guide/client.md for what it promises."""

    def __init__(self, redis: Any, *, prefix: str | None = None, registry: Registry | None = None, owns_redis: bool = False) -> None:
        self.redis = create_redis(redis_client=redis)
        self.prefix = resolve_prefix(prefix)
        self.keys = Keys(self.prefix, cluster=is_cluster(self.redis))
        self.scripts = Scripts(self.redis, self.keys)
        self.clock = ServerClock(self.redis)
        self.search = RunSearch(self.redis, self.keys, self.scripts)
        self.registry = registry
        self._owns_redis = owns_redis or self.redis is not redis
        self._queue_cache: dict[str, str] = {}
        self.workflow_meta_ttl_s = WORKFLOW_META_TTL_S
        self._synced_targets: dict[str, tuple[float, _Target]] = {}  # name -> (read at, monotonic s; target)

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
        return self.clock.now_ms()

    # -- starting runs -----------------------------------------------------
    def _local_workflow(self, name: str) -> Workflow | None:
        if self.registry is not None and name in self.registry:
            return self.registry.get(name)
        return get_default_registry().get(name)

    def resolve_workflow(self, workflow: Workflow | str) -> _Target:
        """Name, queue and attempts of a workflow: the local registry first, else its synced metadata."""
        if isinstance(workflow, Workflow):
            return _Target(workflow.name, workflow.queue, workflow.max_attempts, workflow)
        if not isinstance(workflow, str) or not workflow:
            raise UnknownWorkflowError(str(workflow or ""))
        local = self._local_workflow(workflow)
        if local is not None:
            return _Target(local.name, local.queue, local.max_attempts, local)
        return self._synced_target(workflow)

    def _synced_target(self, name: str) -> _Target:
        """A workflow known only from its synced metadata, read at most once per ``workflow_meta_ttl_s``."""
        now_s = time.monotonic()
        cached = self._synced_targets.get(name)
        if cached is not None and now_s - cached[0] < self.workflow_meta_ttl_s:
            return cached[1]
        queue, max_attempts = self.redis.hmget(self.keys.workflow(name), [WorkflowField.QUEUE, WorkflowField.MAX_ATTEMPTS])
        if not queue:
            self._synced_targets.pop(name, None)
            raise UnknownWorkflowError(name)
        fields = {RunField.MAX_ATTEMPTS: max_attempts} if max_attempts else {}
        target = _Target(name, queue, max_attempts_of(fields, what=f"workflow {name}"), None)
        self._synced_targets[name] = (now_s, target)
        return target

    def prepare_input(self, target: _Target, input: Any) -> tuple[Any, str]:
        """The validated input and its JSON."""
        if target.workflow is not None:
            input = target.workflow.validate(input)
        try:
            return input, codec.dumps(input, what="input")
        except SerializationError as exc:
            raise InputValidationError(f"input of workflow {target.name!r} is not JSON-serializable: {exc}") from exc

    def _flow_fields(self, target: _Target, queue: str, value: Any, priority: int) -> dict[str, str]:
        """The run-hash fields of flow control: its priority, and the limits its
        workflow puts on it (computed here when the workflow is known locally;
        else the worker computes them when it first claims the run)."""
        fields = {RunField.PRIORITY: str(priority)} if check_priority(priority) else {}
        workflow = target.workflow
        if workflow is not None and workflow.flow.active:
            fields[RunField.LIMITS_JSON] = limits_spec(self.keys, target.name, queue, workflow.flow, value)
        return fields

    def run(
        self,
        workflow: Workflow | str,
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
        target = self.resolve_workflow(workflow)
        return self._enqueue(
            target,
            self.prepare_input(target, input),
            priority=priority,
            idempotency_key=idempotency_key,
            queue=queue,
            available_at=self._available_at(delay, run_at),
            max_attempts=max_attempts,
            parent_run_id=parent_run_id,
            idempotency_ttl=idempotency_ttl,
            tags=validate_tags(tags),
        )

    def _enqueue(self, target: _Target, prepared: tuple[Any, str], **options: Any) -> RunHandle:
        if not enqueue_hooks.HOOKS:
            return self._enqueue_now(target, prepared, **options)
        run_ids = enqueue_hooks.hooked(
            "enqueue", target.name, lambda fields: [self._enqueue_now(target, prepared, hook_fields=fields, **options).id]
        )
        return RunHandle(self, run_ids[0])

    def _enqueue_now(
        self,
        target: _Target,
        prepared: tuple[Any, str],
        *,
        idempotency_key: str | None,
        queue: str | None,
        available_at: int | None,
        max_attempts: int | None,
        parent_run_id: str | None,
        idempotency_ttl: int,
        tags: Mapping[str, str] | None = None,
        hook_fields: Mapping[str, str] | None = None,
        priority: int = 0,
        extra_fields: Mapping[str, str] | None = None,
    ) -> RunHandle:
        if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
            raise RedflowError("max_attempts must be an int >= 1")
        if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key):
            raise RedflowError("idempotency_key must be a non-empty string")
        queue = queue or target.queue
        value, input_json = prepared
        fields = {**(hook_fields or {}), **(extra_fields or {}), **self._flow_fields(target, queue, value, priority)}
        if tags:
            fields[RunField.TAGS_JSON] = tags_json(tags)
        now = self.now_ms()
        replace_id = ""
        # An idempotency key naming a run that failed, was canceled or is gone
        # may be taken over; the script only swaps it if it still names that run.
        children_key = self._children_key(parent_run_id) if parent_run_id else None
        index_keys = self.keys.tag_index_keys(target.name, tags, queue) if tags else ()
        for _ in range(8):
            run_id = new_run_id()
            batch = self.scripts.batch()
            listing = self.listing_batch(batch, children_key)
            self._add_enqueue(
                batch, target, input_json, run_id=run_id, queue=queue, now=now, available_at=available_at,
                max_attempts=max_attempts, idempotency_key=idempotency_key, idempotency_ttl=idempotency_ttl,
                replace_id=replace_id, parent_run_id=parent_run_id, children_key=children_key, extra_fields=fields,
                index_keys=index_keys, listing=listing,
            )  # fmt: skip
            with raise_when_full():
                if listing is not batch:
                    listing.execute()
                enqueued: Enqueued = batch.execute()[-1]
            if enqueued.created:
                return RunHandle(self, enqueued.run_id)
            self._unlist(run_id, enqueued.run_id, children_key, now)
            existing_status = self.redis.hget(self.keys.run(enqueued.run_id, queue), RunField.STATUS)
            if existing_status and existing_status not in ("failed", "canceled"):
                return RunHandle(self, enqueued.run_id)
            replace_id = enqueued.run_id
        raise RedflowError(f"idempotency key {idempotency_key!r} keeps changing hands; giving up")

    def _add_enqueue(
        self,
        batch: Any,
        target: _Target,
        input_json: str,
        *,
        run_id: str,
        queue: str,
        now: int,
        available_at: int | None,
        max_attempts: int | None,
        idempotency_key: str | None,
        idempotency_ttl: int,
        replace_id: str,
        parent_run_id: str | None,
        children_key: str | None,
        extra_fields: Mapping[str, str] | None,
        index_keys: Sequence[str] = (),
        listing: Any = None,
    ) -> None:
        """Queue the creation of one run on ``batch``. The run is located and
        listed before it exists: a worker may take it the moment the script
        pushes it, and look it up by id (cluster) or list a parent's children.
        ``listing`` (default ``batch``): where the locating and listing go (see :meth:`listing_batch`)."""
        listing = batch if listing is None else listing
        self._record_queue(run_id, queue, pipe=listing)
        if children_key is not None:
            self.scripts.list_child(children_key=children_key, child_id=run_id, now=now, conn=listing)
        self.scripts.enqueue_run(
            run_id=run_id,
            workflow=target.name,
            queue=queue,
            input_json=input_json,
            created_at=now,
            available_at=available_at or 0,
            max_attempts=max_attempts or target.max_attempts,
            idempotency_key=idempotency_key,
            idempotency_ttl_s=idempotency_ttl,
            replace_id=replace_id,
            parent_run_id=parent_run_id or "",
            extra_fields=extra_fields,
            index_keys=index_keys,
            conn=batch,
        )

    def listing_batch(self, batch: Batch, children_key: str | None) -> Batch:
        """Where a new run is located and listed in its parent's children index:
        ``batch`` itself (one pipeline, in order), but for a child on a cluster
        a batch of its own, to send first: a cluster batch writes each master
        in its own pipeline, in no set order, and a child that exists must be
        listed already, for a cancel of its parent to find it (engine/fence.py)."""
        return self.scripts.batch() if children_key is not None and self.keys.cluster else batch

    def run_many(
        self, workflow: Workflow | str, inputs: Iterable[Any], *, queue: str | None = None, batch: int = 500, priority: int = 0
    ) -> list[RunHandle]:
        """Start many runs of one workflow, one pipelined round trip per
        ``batch`` runs (no idempotency keys, no delays): bulk loads and benches."""
        target = self.resolve_workflow(workflow)
        queue = queue or target.queue
        self._load_scripts_for_batches()
        handles: list[RunHandle] = []
        pipe = self.scripts.batch()
        sent = 0
        for raw in inputs:
            run_id = new_run_id()
            value, input_json = self.prepare_input(target, raw)
            self._record_queue(run_id, queue, pipe=pipe)  # before the run can be taken
            self.scripts.enqueue_run(
                run_id=run_id,
                workflow=target.name,
                queue=queue,
                input_json=input_json,
                created_at=self.now_ms(),
                available_at=0,
                max_attempts=target.max_attempts,
                idempotency_key=None,
                idempotency_ttl_s=IDEMPOTENCY_TTL_S,
                extra_fields=self._flow_fields(target, queue, value, priority),
                conn=pipe,
            )
            handles.append(RunHandle(self, run_id))
            if len(pipe) >= batch:
                sent = self._send_runs(pipe, sent, len(handles))
        if len(pipe):
            self._send_runs(pipe, sent, len(handles))
        return handles

    @staticmethod
    def _send_runs(pipe: Any, sent: int, count: int) -> int:
        with raise_when_full(f"{sent} run(s) of this run_many call were enqueued before this batch, and some of its {count - sent} may be"):
            pipe.execute()
        return count

    def _available_at(self, delay: float | None, run_at: float | None) -> int | None:
        """When a run may start, in Redis's clock: ``delay`` counts from Redis's now."""
        if delay is not None and run_at is not None:
            raise RedflowError("give delay= or run_at=, not both")
        if delay is not None:
            return self.now_ms() + int(delay * 1000)
        if run_at is not None:
            return int(run_at * 1000)
        return None

    # -- where runs live ---------------------------------------------------
    def _record_queue(self, run_id: str, queue: str, pipe: Any = None) -> None:
        """Cluster mode: remember the run's queue (its hash slot) by id."""
        if not self.keys.cluster:
            return
        self._queue_cache[run_id] = queue
        target = pipe if pipe is not None else self.redis.pipeline(transaction=False)
        target.hset(self.keys.run_queues(), run_id, queue)
        target.sadd(self.keys.queues(), queue)
        if pipe is None:
            target.execute()

    def _unlist(self, proposed_id: str, existing_id: str, children_key: str | None, now: int) -> None:
        """The idempotency key named an existing run: forget the id that was not created."""
        fix = self.scripts.batch()
        if self.keys.cluster:
            self._queue_cache.pop(proposed_id, None)
            fix.hdel(self.keys.run_queues(), proposed_id)
        if children_key is not None:
            fix.zadd(children_key, {existing_id: now}, nx=True).zrem(children_key, proposed_id)
        if len(fix):
            fix.execute()

    def _slot_queue(self, run_id: str) -> tuple[bool, str | None]:
        """What a run's keys need: ``(True, None)`` outside cluster mode; in it,
        ``(found, queue)`` from the run-queues hash (cached: a run never moves)."""
        if not self.keys.cluster:
            return True, None
        queue = self._queue_cache.get(run_id)
        if queue is None:
            queue = self.redis.hget(self.keys.run_queues(), run_id)
            if queue is None:
                return False, None
            if len(self._queue_cache) > _QUEUE_CACHE_MAX:
                self._queue_cache.clear()
            self._queue_cache[run_id] = queue
        return True, queue

    def _children_key(self, parent_run_id: str) -> str | None:
        found, parent_queue = self._slot_queue(parent_run_id)
        return self.keys.run_children(parent_run_id, parent_queue) if found else None

    def list_children(self, run_id: str) -> list[str]:
        """Ids of the runs started with ``run_id`` as their parent, oldest first
        (ids whose run is gone are left out)."""
        key = self._children_key(run_id)
        ids = self.redis.zrange(key, 0, -1) if key else []
        located = [(child_id, queue) for child_id in ids for found, queue in [self._slot_queue(child_id)] if found]
        if not located:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for child_id, queue in located:
            pipe.exists(self.keys.run(child_id, queue))
        return [child_id for (child_id, _), exists in zip(located, pipe.execute()) if exists]

    def queue_of(self, run_id: str) -> str | None:
        """The queue of a run, or ``None`` if there is no such run."""
        found, queue = self._slot_queue(run_id)
        if not found:
            return None
        return queue if queue is not None else self.redis.hget(self.keys.run(run_id), RunField.QUEUE)

    def known_queues(self) -> list[str]:
        """Queues named by synced workflows and by cron and event triggers, and
        (cluster mode) every queue that has had runs. Outside cluster mode a
        queue only a ``run(queue=...)`` used is not known: finding it would
        mean scanning the keyspace."""
        keys = self.keys
        names = sorted(self.redis.smembers(keys.workflows()))
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(keys.workflow(name), WorkflowField.QUEUE)
        pipe.hvals(keys.cron_def())
        pipe.hvals(keys.event_def())
        *workflow_queues, cron_raw, event_raw = pipe.execute()
        queues = {q for q in workflow_queues if q}
        for raw in [*cron_raw, *event_raw]:
            record = codec.try_loads(raw)
            if isinstance(record, dict) and isinstance(record.get("queue"), str) and record["queue"]:
                queues.add(record["queue"])
        if keys.cluster:
            queues.update(self.redis.smembers(keys.queues()))
        return sorted(queues)

    def _index_queues(self) -> list[str | None]:
        """The queues whose indexes a listing reads: all of them in cluster mode; outside it, one global index."""
        return list(self.known_queues()) if self.keys.cluster else [None]

    # -- reading runs ------------------------------------------------------
    def read_state(self, run_id: str, *, watch: bool = False) -> RunState | None:
        """Status and result of a run; with ``watch``, an unfinished run is also
        flagged as waited for, so that whoever finishes it wakes its waiters."""
        found, slot_queue = self._slot_queue(run_id)
        if not found:
            return None
        if watch:
            reply = self.scripts.watch_run(run_id=run_id, queue=slot_queue)
        else:
            reply = self.redis.hmget(self.keys.run(run_id, slot_queue), STATE_FIELDS)
        return RunState.from_reply(run_id, reply)

    def wait_for(self, run_id: str, *, timeout: float = 30.0, assist: Any = None) -> RunState:
        """Block until the run is terminal. Wakes on the run's done token the
        moment a redflow-gevent worker finishes it, and re-reads the hash at
        growing intervals (50 ms .. 1 s) for runs finished by other clients.
        ``assist(state) -> bool`` may run a pending run itself (inline child)."""
        deadline = time.monotonic() + timeout
        slice_s = _WAIT_SLICE_MIN_S
        done_key = ""
        while True:
            state = self.read_state(run_id, watch=True)
            if state is None:
                raise RunNotFoundError(run_id)
            if state.is_terminal:
                return state
            if assist is not None and assist(state):
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"Timed out waiting for run result ({run_id})")
            done_key = done_key or self.keys.run_done(run_id, state.queue)
            self.redis.blmove(done_key, done_key, min(remaining, slice_s), "RIGHT", "LEFT")
            slice_s = min(slice_s * 2, _WAIT_SLICE_MAX_S)

    def get_run(self, run_id: str) -> Run | None:
        found, queue = self._slot_queue(run_id)
        fields = self.redis.hgetall(self.keys.run(run_id, queue)) if found else None
        return Run.from_hash(run_id, fields) if fields else None

    def get_steps(self, run_id: str) -> list[Step]:
        found, queue = self._slot_queue(run_id)
        raw = self.redis.hgetall(self.keys.run_steps(run_id, queue)) if found else {}
        return sorted((Step.from_json(name, value) for name, value in raw.items()), key=lambda s: (s.seq, s.name))

    def count_runs(self, status: str) -> int:
        """How many runs are in ``status`` (all queues)."""
        _check_status(status)
        return self.status_counts((status,))[status]

    def status_counts(self, statuses: Iterable[str] = RUN_STATUSES) -> dict[str, int]:
        """How many runs are in each status (all queues), in one round trip."""
        statuses, queues = list(statuses), self._index_queues()
        pipe = self.redis.pipeline(transaction=False)
        for status in statuses:
            for queue in queues:
                pipe.zcard(self.keys.runs_status(status, queue))
        counts = iter(pipe.execute())
        return {status: sum(next(counts) for _ in queues) for status in statuses}

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
        return self.search.page(RunFilter.of(workflow, status, tags), self._index_queues(), limit=limit, cursor=cursor)

    def count_matching(self, workflow: str | None = None, status: str | None = None, *, tags: Mapping[str, str] | None = None) -> int:
        """How many runs match (an index's size, or a bounded-batch walk)."""
        return self.search.count(RunFilter.of(workflow, status, tags), self._index_queues())

    # -- cancel ------------------------------------------------------------
    def _target(self, run_id: str) -> tuple[str, list[str]] | None:
        """A run's queue and failed / canceled index pairs, or None if there is no such run."""
        found, slot_queue = self._slot_queue(run_id)
        return self.search.targets([Entry(0.0, run_id, slot_queue)])[0] if found else None

    def cancel(self, run_id: str, reason: str | None = None) -> bool:
        """Cancel a run: ``True`` if it is canceled now or its worker was told
        to stop it; ``False`` if it already ended or does not exist. Its
        unfinished children are canceled too, recursively (also those of a run
        canceled already: a cancel whose caller died before its cascade is
        finished by the next)."""
        target = self._target(run_id)
        if target is None:
            return False
        queue, index_keys = target
        outcome = self.scripts.cancel_run(
            run_id=run_id, queue=queue, now=self.now_ms(), reason=reason or "", error_json=bulk.cancel_error_json(reason),
            index_keys=index_keys,
        )  # fmt: skip
        if outcome == "terminal" and self.redis.hget(self.keys.run(run_id, queue), RunField.STATUS) == "canceled":
            client_waits.cancel_children(self, run_id, reason=reason)
        if outcome not in ("canceled", "requested"):
            return False
        if outcome == "canceled":
            client_waits.report_child_end(self, run_id, queue)
        client_waits.cancel_children(self, run_id, reason=reason)
        return True

    def retry(self, run_id: str) -> bool:
        """Run a failed or canceled run again under the same id: its succeeded
        steps replay, and it gets a fresh attempt budget. ``False`` if the
        run is missing or not failed/canceled."""
        target = self._target(run_id)
        if target is None:
            return False
        queue, index_keys = target
        return self.scripts.retry_run(run_id=run_id, queue=queue, now=self.now_ms(), index_keys=index_keys).accepted

    def retry_many(self, workflow: str | None = None, status: str | None = "failed", tags: Mapping[str, str] | None = None) -> int:
        """Retry every run that matches (``status`` failed, canceled, or None for
        both), in bounded batches, each at most once; returns how many were retried."""
        self._load_scripts_for_batches()
        return bulk.retry_many(self.search, RunFilter.of(workflow, status, tags), self._index_queues(), self.now_ms)

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
        self._load_scripts_for_batches()
        return bulk.cancel_many(
            self.search, RunFilter.of(workflow, status, tags), self._index_queues(), self.now_ms, reason,
            then=lambda run_ids: client_waits.cancel_descendants(self, run_ids, reason=reason),
        )  # fmt: skip

    def _load_scripts_for_batches(self) -> None:
        if self.keys.cluster:
            self.scripts.load_all()  # a cluster pipeline does not load scripts by itself

    # -- retention: deleting finished runs -----------------------------------
    def purge(self, older_than: float | timedelta, status: str | None = None, workflow: str | None = None, *, dry_run: bool = False) -> int:
        """Delete finished runs (hash, steps, index entries) that ended at least
        ``older_than`` seconds ago, only of ``status`` / ``workflow`` when given,
        in bounded batches. Live runs are never touched, nor the children of a
        run that is unfinished (its replay reads them). Returns how many runs
        were deleted (with ``dry_run``, how many would be)."""
        seconds = duration_s(older_than, "older_than", zero_ok=True)
        if seconds is None:
            raise RedflowError("older_than is required: purge deletes runs that ended at least that many seconds ago")
        if status is not None and status not in FINISHED_STATUSES:
            raise RedflowError(f"purge deletes finished runs: status must be one of {', '.join(FINISHED_STATUSES)}, not {status!r}")
        if workflow is not None and (not isinstance(workflow, str) or not workflow):
            raise RedflowError("workflow must be a non-empty string")
        query = PurgeQuery(self.now_ms() - round(seconds * 1000), (status,) if status else FINISHED_STATUSES, workflow)
        return purge_finished(self.scripts, self.redis, query, self._index_queues(), dry_run=dry_run)

    # -- events (redflow/client_events.py) -----------------------------------
    def event_subscribers(self, event: str) -> list[EventDef]:
        return client_events.event_defs(self, self.redis.smembers(self.keys.event_index(event)))

    def emit_event(self, name: str, payload: Any = None, idempotency_key: str | None = None) -> list[str]:
        """Start one run per workflow subscribed to ``name``, and resume the runs
        waiting for it (``step.wait_for_event``) whose match the payload
        satisfies; returns the ids of the runs started."""
        return client_events.fan_out(self, name, payload, idempotency_key, None, IDEMPOTENCY_TTL_S)

    def schedule_event(self, name: str, payload: Any = None, at: float | None = None, idempotency_key: str | None = None) -> list[str]:
        """Like :meth:`emit_event`, with the runs starting at unix time ``at``;
        runs waiting for the event at that time get it then (a worker delivers it)."""
        if at is None:
            raise RedflowError("schedule_event needs at= (unix seconds)")
        return client_events.fan_out(self, name, payload, idempotency_key, self._available_at(None, at), IDEMPOTENCY_TTL_S)

    # -- durable waits and fan-out (redflow/client_waits.py) ------------------
    def start_children(self, workflow: Workflow | str, inputs: Sequence[Any], *, parent_run_id: str, parent_queue: str,
                       step: str) -> list[str]:  # fmt: skip
        """Start the children of ``step.run_workflows`` (one per input, idempotent); their ids in input order."""
        return client_waits.start_children(self, workflow, inputs, parent_run_id=parent_run_id, parent_queue=parent_queue, step=step)

    def read_states(self, run_ids: Sequence[str]) -> list[RunState | None]:
        """:meth:`read_state` of many runs in one round trip (``None`` for a missing run)."""
        return client_waits.read_states(self, run_ids)

    def get_progress(self, run_id: str) -> Any:
        """The latest value run ``run_id`` gave ``ctx.progress``, or ``None``."""
        return client_waits.get_progress(self, run_id)

    def register_event_wait(self, event: str, waiter: EventWaiter) -> None:
        """Put a run parking in ``step.wait_for_event`` in ``event``'s waiter index."""
        event_waiters.register(self.scripts, event, waiter)

    def forget_event_wait(self, event: str, waiter: EventWaiter) -> None:
        """Take a run whose wait ended out of ``event``'s waiter index (unless it waits again)."""
        event_waiters.forget(self.scripts, event, waiter)

    # -- registry ----------------------------------------------------------
    def sync_registry(self, registry: Registry | None = None) -> None:
        """Store workflow metadata and cron / event triggers in Redis; drop stale triggers."""
        from redflow.sync import sync_registry

        sync_registry(self, registry if registry is not None else get_default_registry())
        self._synced_targets.clear()  # this client sees what it just stored at once


_STATUS_SET = frozenset(RUN_STATUSES)
_QUEUE_CACHE_MAX = 100_000


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
) -> RedflowClient:
    """A client for ``url`` (default ``REDIS_URL`` or local; ``redis+cluster://`` and
    ``redis+sentinel://`` URLs work, as does ``cluster=True``) or an existing
    redis-py ``Redis`` / ``RedisCluster``. It pools up to ``max_connections``
    (default 128, per node on a cluster); past that, greenlets wait for a free one."""
    if redis is not None:
        client = RedflowClient(redis, prefix=prefix, registry=registry)
    else:
        base = create_redis(url, cluster=cluster, max_connections=max_connections)
        client = RedflowClient(base, prefix=prefix, registry=registry, owns_redis=True)
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
