"""The enqueue pipeline: every run is created here, from one :class:`EnqueueRequest`.

``client.run``, event subscribers' runs, cron fires, ``run_many`` and the
children of ``step.run_workflows`` all end in :func:`enqueue`,
:func:`enqueue_children` or :func:`enqueue_many`. A run is located (cluster:
its queue by id) and listed in its parent's children index before it
exists, then created by ``enqueue_run.lua`` in the same round trip. An
idempotency key that names a run already returns that run, unless it
failed, was canceled or is gone: then the key is taken over (the script
swaps it only if it still names that run), unless the request keeps
whatever run the key names (a schedule's tick, ``step.emit_workflow``'s run). A singleton
key or debounce window (``core/singleton.py``) that returns another run returns it; a
singleton's "replace" cancels the key's run and takes the key from it. Enqueue hooks
(``core/enqueue_hooks.py``: tracing) wrap each run started by itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from redflow.core import enqueue_hooks
from redflow.core.errors import RedflowError
from redflow.core.keys import new_id
from redflow.core.models import RunField
from redflow.core.singleton import REPLACED_REASON
from redflow.store.batch import Batch
from redflow.store.cancel import cancel_run
from redflow.store.memory import raise_when_full
from redflow.store.port import Store
from redflow.store.replies import Enqueued
from redflow.store.requests import EnqueueRequest

#: How many times an idempotency key that keeps changing hands is tried.
TAKEOVER_TRIES = 8
#: Statuses whose run an idempotency key may be taken from (and a gone run's).
_REPLACEABLE = ("failed", "canceled")
#: What a singleton key or debounce window did instead of creating a run: the call's run is that one.
_ONE_RUN = ("skipped", "collapsed")


def new_run_id() -> str:
    return new_id("run")


def enqueue(store: Store, request: EnqueueRequest) -> str:
    """Create the run ``request`` describes, inside every enqueue hook; its id
    (an existing run's, when its idempotency key names one that stands)."""
    if not enqueue_hooks.HOOKS:
        return _enqueue_now(store, request)

    def start(fields: dict[str, str]) -> list[str]:
        return [_enqueue_now(store, dataclasses.replace(request, fields={**fields, **request.fields}))]

    return enqueue_hooks.hooked("enqueue", request.workflow, start)[0]


def _enqueue_now(store: Store, request: EnqueueRequest) -> str:
    now_ms = store.now_ms()
    replace_id = ""
    parent = request.parent_run_id
    children_key = store.locator.children_key(parent) if parent and not request.detached else None
    for _ in range(TAKEOVER_TRIES):
        run_id = new_run_id()
        batch = store.batch()
        listing = store.locator.listing_batch(batch, children_key)
        add(store, batch, request, run_id=run_id, now_ms=now_ms, replace_id=replace_id, children_key=children_key, listing=listing)
        with raise_when_full():
            if listing is not batch:
                listing.execute()
            enqueued: Enqueued = batch.execute()[-1]
        if enqueued.created:
            return run_id
        store.locator.unlist(run_id, enqueued.run_id, children_key, now_ms)
        if enqueued.kind in _ONE_RUN:
            return enqueued.run_id
        if enqueued.kind == "conflict":  # a singleton's "replace": cancel the key's run, then take the key from it
            cancel_run(store, enqueued.run_id, reason=REPLACED_REASON)
            request = dataclasses.replace(request, replace_from=enqueued.run_id)
            continue
        if request.keep_existing:
            return enqueued.run_id
        existing_status = store.redis.hget(store.keys.run(enqueued.run_id, request.queue), RunField.STATUS)
        if existing_status and existing_status not in _REPLACEABLE:
            return enqueued.run_id
        replace_id = enqueued.run_id
    what = f"idempotency key {request.idempotency_key!r}" if request.replace_from == "" else "singleton key"
    raise RedflowError(f"{what} keeps changing hands; giving up")


def add(
    store: Store,
    batch: Batch,
    request: EnqueueRequest,
    *,
    run_id: str,
    now_ms: int,
    replace_id: str = "",
    children_key: str | None = None,
    listing: Batch | None = None,
) -> None:
    """Queue the creation of run ``run_id`` on ``batch``. The run is located and
    listed before it exists: a worker may take it the moment the script
    pushes it, and look it up by id (cluster) or list a parent's children.
    ``listing`` (default ``batch``): where the locating and listing go
    (see :meth:`~redflow.store.locator.RunLocator.listing_batch`)."""
    listing = batch if listing is None else listing
    store.locator.record(run_id, request.queue, pipe=listing)
    if children_key is not None:
        store.scripts.list_child(children_key=children_key, child_id=run_id, now_ms=now_ms, conn=listing)
    store.scripts.enqueue_run(request, run_id=run_id, created_at_ms=now_ms, replace_id=replace_id, conn=batch)


def enqueue_children(store: Store, parent_run_id: str, requests: Sequence[EnqueueRequest]) -> list[str]:
    """Create the children of ``step.run_workflows`` in one batch, each listed
    in the parent's children index before it exists; ids in request order.
    A child whose idempotency key names a run already keeps it, or replaces
    it if it failed (:func:`enqueue`'s rules): a retried parent starts none twice."""
    if not requests:
        return []
    children_key, now_ms = store.locator.children_key(parent_run_id), store.now_ms()
    batch, proposed = store.batch(), [new_run_id() for _ in requests]
    listing = store.locator.listing_batch(batch, children_key)  # each child is listed before it exists
    for run_id, request in zip(proposed, requests):
        add(store, batch, request, run_id=run_id, now_ms=now_ms, children_key=children_key, listing=listing)
    if listing is not batch:
        listing.execute()
    replies = [reply for reply in batch.execute() if isinstance(reply, Enqueued)]
    ids = []
    for run_id, request, enqueued in zip(proposed, requests, replies):
        if enqueued.created:
            ids.append(run_id)
            continue
        # The key names a run already (a replayed step): keep it, or replace it if it failed.
        store.locator.unlist(run_id, enqueued.run_id, children_key, now_ms)
        ids.append(enqueue(store, request))
    return ids


def enqueue_many(store: Store, requests: Iterable[EnqueueRequest], *, batch: int = 500) -> list[str]:
    """Create many runs, one pipelined round trip per ``batch`` runs (no
    idempotency keys, no hooks): bulk loads and benches. ``requests`` may be
    lazy: a bad input raises once the batches before it were sent."""
    store.load_scripts_for_batches()
    run_ids: list[str] = []
    pipe = store.batch()
    sent = 0
    for request in requests:
        if request.claim is not None:  # a singleton or debounced run: it may be another run, decided one by one
            run_ids.append(enqueue(store, request))
            continue
        run_id = new_run_id()
        store.locator.record(run_id, request.queue, pipe=pipe)  # before the run can be taken
        store.scripts.enqueue_run(request, run_id=run_id, created_at_ms=store.now_ms(), conn=pipe)
        run_ids.append(run_id)
        if len(pipe) >= batch:
            sent = _send(pipe, sent, len(run_ids))
    if len(pipe):
        _send(pipe, sent, len(run_ids))
    return run_ids


def _send(pipe: Batch, sent: int, count: int) -> int:
    with raise_when_full(f"{sent} run(s) of this run_many call were enqueued before this batch, and some of its {count - sent} may be"):
        pipe.execute()
    return count
