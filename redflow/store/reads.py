"""Reading runs: their state, waiting for their end, their hash, steps and progress.

A run is found by id through the locator (its queue, on a cluster). A
waiter reads the few fields of :class:`~redflow.core.run_state.RunState`
and wakes on the run's done token, which whoever finishes a waited-for run
pushes (``watch_run.lua`` flags the run as waited for). Payloads stored as
``@blob:`` references are read from the run's blob hash in one more round
trip, only for runs that hold one (``store/payloads.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from redflow.core import codec
from redflow.core.blobs import refs_in
from redflow.core.errors import RunNotFoundError, TimeoutError
from redflow.core.models import PAYLOAD_FIELDS, Run, RunField, Step, TriggerField, WorkflowField, payload
from redflow.core.run_state import STATE_FIELDS, RunState
from redflow.store.payloads import read_blobs, read_many_blobs
from redflow.store.port import Store

WAIT_SLICE_MIN_S = 0.05
WAIT_SLICE_MAX_S = 1.0


def read_state(store: Store, run_id: str, *, watch: bool = False) -> RunState | None:
    """Status and result of a run; with ``watch``, an unfinished run is also
    flagged as waited for, so that whoever finishes it wakes its waiters."""
    found, slot_queue = store.locator.slot_queue(run_id)
    if not found:
        return None
    if watch:
        reply = store.scripts.watch_run(run_id=run_id, queue=slot_queue)
    else:
        reply = store.redis.hmget(store.keys.run(run_id, slot_queue), STATE_FIELDS)
    return _state_of(store, run_id, slot_queue, reply)


def _state_of(store: Store, run_id: str, slot_queue: str | None, reply: Any) -> RunState | None:
    """The state a read replied, with the blobs its ``@blob:`` references name (one more round trip, only for those)."""
    state = RunState.from_reply(run_id, reply)
    if state is not None and state.blob_fields():
        blobs = read_blobs(store.redis, store.keys.run_blobs(run_id, slot_queue), (state.output_json, state.error_json))
        state = dataclasses.replace(state, blobs=blobs)
    return state


def read_states(store: Store, run_ids: Sequence[str]) -> list[RunState | None]:
    """:func:`read_state` of many runs in one round trip (``None`` for a missing run)."""
    located = [store.locator.slot_queue(run_id) for run_id in run_ids]
    pipe = store.pipeline()
    for run_id, (found, queue) in zip(run_ids, located):
        if found:
            pipe.hmget(store.keys.run(run_id, queue), STATE_FIELDS)
    replies = iter(pipe.execute() if len(pipe) else [])
    states = [RunState.from_reply(run_id, next(replies)) if found else None for run_id, (found, _) in zip(run_ids, located)]
    referring = [(i, state) for i, state in enumerate(states) if state is not None and state.blob_fields()]
    if referring:
        wanted = [(store.keys.run_blobs(state.run_id, located[i][1]), (state.output_json, state.error_json)) for i, state in referring]
        for (i, state), blobs in zip(referring, read_many_blobs(store.redis, wanted)):
            states[i] = dataclasses.replace(state, blobs=blobs)
    return states


def wait_for(store: Store, run_id: str, *, timeout_s: float = 30.0, assist: Callable[[RunState], bool] | None = None) -> RunState:
    """Block until the run is terminal. Wakes on the run's done token the
    moment a redflow-gevent worker finishes it, and re-reads the hash at
    growing intervals (50 ms .. 1 s) for runs finished by other clients.
    ``assist(state) -> bool`` may run a pending run itself (inline child).

    The re-read is sent with the blocking wait, in one pipeline: Redis runs a
    blocked connection's next command as soon as the wait ends, so the waiter
    hears the run's end in the reply that wakes it, not one round trip (and
    one more turn of the waiting process's loop) later."""
    deadline = time.monotonic() + timeout_s
    slice_s = WAIT_SLICE_MIN_S
    done_key = ""
    state = read_state(store, run_id, watch=True)
    while True:
        if state is None:
            raise RunNotFoundError(run_id)
        if state.is_terminal:
            return state
        if assist is not None and assist(state):
            state = read_state(store, run_id, watch=True)
            continue
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise TimeoutError(f"Timed out waiting for run result ({run_id})")
        done_key = done_key or store.keys.run_done(run_id, state.queue)
        state = _wait_then_read(store, run_id, done_key, min(remaining_s, slice_s))
        slice_s = min(slice_s * 2, WAIT_SLICE_MAX_S)


def _wait_then_read(store: Store, run_id: str, done_key: str, block_s: float) -> RunState | None:
    """Block on the run's done token for ``block_s``, then read the run (watching it), in one round trip.
    The two keys share the run's slot, so a cluster sends both to one master, in order."""
    found, slot_queue = store.locator.slot_queue(run_id)
    if not found:
        return None
    batch = store.scripts.batch()
    batch.blmove(done_key, done_key, block_s, "RIGHT", "LEFT")
    store.scripts.watch_run(run_id=run_id, queue=slot_queue, conn=batch)
    _, reply = batch.execute()
    return _state_of(store, run_id, slot_queue, reply)


def get_run(store: Store, run_id: str) -> Run | None:
    found, queue = store.locator.slot_queue(run_id)
    fields = store.redis.hgetall(store.keys.run(run_id, queue)) if found else None
    if not fields:
        return None
    blobs = read_blobs(store.redis, store.keys.run_blobs(run_id, queue), (fields.get(name) for name in PAYLOAD_FIELDS))
    return Run.from_hash(run_id, fields, blobs=blobs)


def get_steps(store: Store, run_id: str) -> list[Step]:
    found, queue = store.locator.slot_queue(run_id)
    raw = store.redis.hgetall(store.keys.run_steps(run_id, queue)) if found else {}
    refs = [ref for record in raw.values() for ref in refs_in(record)]
    blobs = read_blobs(store.redis, store.keys.run_blobs(run_id, queue), refs)
    steps = (Step.from_json(name, value, blobs=blobs, run_id=run_id) for name, value in raw.items())
    return sorted(steps, key=lambda s: (s.seq, s.name))


def get_progress(store: Store, run_id: str) -> Any:
    """The latest ``ctx.progress`` value of a run, or ``None``."""
    found, queue = store.locator.slot_queue(run_id)
    raw = store.redis.hget(store.keys.run(run_id, queue), RunField.PROGRESS_JSON) if found else None
    if raw is None or raw == "":
        return None
    blobs = read_blobs(store.redis, store.keys.run_blobs(run_id, queue), (raw,))
    return payload(raw, blobs, run_id=run_id, field=RunField.PROGRESS_JSON)


def status_counts(store: Store, statuses: Iterable[str], queues: Sequence[str | None]) -> dict[str, int]:
    """How many runs are in each status (the indexes of ``queues``), in one round trip."""
    statuses = list(statuses)
    pipe = store.pipeline()
    for status in statuses:
        for queue in queues:
            pipe.zcard(store.keys.runs_status(status, queue))
    counts = iter(pipe.execute())
    return {status: sum(next(counts) for _ in queues) for status in statuses}


def known_queues(store: Store) -> list[str]:
    """Queues named by synced workflows and by cron and event triggers, and
    (cluster mode) every queue that has had runs. Outside cluster mode a
    queue only a ``run(queue=...)`` used is not known: finding it would
    mean scanning the keyspace."""
    keys = store.keys
    names = sorted(store.redis.smembers(keys.workflows()))
    pipe = store.pipeline()
    for name in names:
        pipe.hget(keys.workflow(name), WorkflowField.QUEUE)
    pipe.hvals(keys.cron_def())
    pipe.hvals(keys.event_def())
    *workflow_queues, cron_raw, event_raw = pipe.execute()
    queues = {q for q in workflow_queues if q}
    for raw in [*cron_raw, *event_raw]:
        queue = _queue_of_trigger(raw)
        if queue:
            queues.add(queue)
    if keys.cluster:
        queues.update(store.redis.smembers(keys.queues()))
    return sorted(queues)


def _queue_of_trigger(raw: str) -> str | None:
    """The queue a stored cron or event definition names, if it can be read."""
    record = codec.try_loads(raw)
    queue = record.get(TriggerField.QUEUE) if isinstance(record, dict) else None
    return queue if isinstance(queue, str) and queue else None


def index_queues(store: Store) -> list[str | None]:
    """The queues whose indexes a listing reads: all of them in cluster mode; outside it, one global index."""
    return list(known_queues(store)) if store.keys.cluster else [None]
