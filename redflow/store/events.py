"""Events: emitting and scheduling one, and the runs it starts.

``emit_event`` starts one run per subscribed workflow (``P:event:def``,
``P:event:index:<event>``) and resolves the waits of the runs waiting for
it (``store/event_waiters.py``); ``schedule_event`` stores the event to fire
later (``P:events:scheduled``: a worker delivers it to its waiters then,
:func:`deliver_scheduled`) and starts the subscribers' runs at that time
(delayed runs). Subscribers and waiters are read in one round trip, so an
event nobody waits for costs what it always did; the payload is checked
against every subscriber's schema before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redflow.core import enqueue_hooks
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.idempotency import event_run_idempotency_key
from redflow.core.keys import new_id
from redflow.core.models import EventDef, scheduled_event_json
from redflow.store import event_waiters
from redflow.store.enqueue import enqueue
from redflow.store.port import Store
from redflow.store.requests import IDEMPOTENCY_TTL_S
from redflow.store.targets import Targets


def event_defs(store: Store, def_ids: Iterable[str]) -> list[EventDef]:
    """The subscriptions named by ``def_ids`` (a broken one is skipped, not fatal)."""
    ids = sorted(def_ids)
    if not ids:
        return []
    subscribers = []
    for raw in store.redis.hmget(store.keys.event_def(), ids):
        if raw is None:
            continue
        try:
            subscribers.append(EventDef.from_json(raw))
        except CorruptDataError:
            continue  # a broken subscription must not block the others
    return subscribers


def subscribers(store: Store, event: str) -> list[EventDef]:
    """The workflows subscribed to ``event``."""
    return event_defs(store, store.redis.smembers(store.keys.event_index(event)))


def fan_out(
    store: Store,
    targets: Targets,
    name: str,
    payload: Any,
    *,
    idempotency_key: str | None = None,
    at_ms: int | None = None,
    idempotency_ttl_s: int = IDEMPOTENCY_TTL_S,
) -> list[str]:
    """Emit (``at_ms`` None) or schedule an event; the ids of the subscribers' runs.

    All or nothing for bad input: the payload is checked against every
    subscriber's schema (its code's, else the one its worker synced) before
    anything is written, so a refusal starts no run, resumes no waiting run
    and schedules nothing."""
    if not name or not isinstance(name, str):
        raise RedflowError("an event needs a non-empty name")
    payload_json = store.payloads.event_json(payload, name)
    # Subscribers and waiters in one round trip (reads only).
    batch = store.batch()
    batch.smembers(store.keys.event_index(name))
    if at_ms is None:
        batch.hgetall(store.keys.event_waiters(name))
    def_ids, *read = batch.execute()
    key = event_run_idempotency_key(name, idempotency_key) if idempotency_key else None
    requests = [
        targets.request(
            targets.resolve(sub.workflow),
            payload,
            queue=sub.queue,
            idempotency_key=key,
            idempotency_ttl_s=idempotency_ttl_s,
            available_at_ms=at_ms or 0,
        )
        for sub in event_defs(store, def_ids)
    ]  # every subscriber's check passed: now write
    if at_ms is not None:
        event_id = key or new_id("event")
        store.scripts.schedule_event(entry=scheduled_event_json(event_id, name, payload_json), at_ms=at_ms)
    elif read[0]:
        event_waiters.deliver(store.scripts, store.payloads, name, payload_json, read[0], store.now_ms())

    def start(_: dict[str, str]) -> list[str]:
        return [enqueue(store, request) for request in requests]

    return enqueue_hooks.hooked("event", name, start) if enqueue_hooks.HOOKS else start({})


def deliver_scheduled(store: Store, name: str, payload_json: str, fired_at_ms: float) -> list[str]:
    """Deliver a scheduled event to the runs waiting for it since before
    ``fired_at_ms`` (Redis ms), and to no subscriber: late or twice, it
    reaches no later wait. The ids of the runs it was delivered to."""
    waiters = store.redis.hgetall(store.keys.event_waiters(name))
    if not waiters:
        return []
    return event_waiters.deliver(store.scripts, store.payloads, name, payload_json, waiters, store.now_ms(), fired_at_ms)
