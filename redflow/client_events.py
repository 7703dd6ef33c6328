"""The client's part of events (``RedflowClient`` calls these).

``emit_event`` starts one run per subscribed workflow and resumes the runs
waiting for the event; ``schedule_event`` stores the event to fire later
(a worker delivers it to its waiters then) and starts the subscribers'
runs at that time. Everything here uses the client's own connection, keys
and scripts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from redflow import enqueue_hooks
from redflow.core import codec
from redflow.core.errors import CorruptDataError, InputValidationError, RedflowError, SerializationError
from redflow.core.keys import event_run_idempotency_key, new_id
from redflow.core.models import EventDef, scheduled_event_json
from redflow.store import event_waiters

if TYPE_CHECKING:
    from redflow.client import RedflowClient


def event_defs(client: RedflowClient, def_ids: Iterable[str]) -> list[EventDef]:
    """The subscriptions named by ``def_ids`` (a broken one is skipped, not fatal)."""
    ids = sorted(def_ids)
    if not ids:
        return []
    subscribers = []
    for raw in client.redis.hmget(client.keys.event_def(), ids):
        if raw is None:
            continue
        try:
            subscribers.append(EventDef.from_json(raw))
        except CorruptDataError:
            continue  # a broken subscription must not block the others
    return subscribers


def fan_out(
    client: RedflowClient, name: str, payload: Any, idempotency_key: str | None, available_at: int | None, idempotency_ttl: int
) -> list[str]:
    """Emit (``available_at`` None) or schedule an event; the ids of the subscribers' runs
    (``idempotency_ttl``: how long their idempotency keys live, as ``client.run``'s)."""
    if not name or not isinstance(name, str):
        raise RedflowError("an event needs a non-empty name")
    payload_json = _payload_json(name, payload)
    # Subscribers and waiters (or, for a scheduled event, its record) in one round trip.
    batch = client.scripts.batch()
    batch.smembers(client.keys.event_index(name))
    if available_at is None:
        batch.hgetall(client.keys.event_waiters(name))
    else:
        event_id = event_run_idempotency_key(name, idempotency_key) if idempotency_key else new_id("event")
        client.scripts.schedule_event(entry=scheduled_event_json(event_id, name, payload_json), at_ms=available_at, conn=batch)
    def_ids, waiters = batch.execute()
    if available_at is None and waiters:
        event_waiters.deliver(client.scripts, name, payload_json, waiters, client.now_ms())

    def start(_: dict[str, str]) -> list[str]:
        return _start_subscribers(client, name, payload, idempotency_key, available_at, def_ids, idempotency_ttl)

    return enqueue_hooks.hooked("event", name, start) if enqueue_hooks.HOOKS else start({})


def _start_subscribers(
    client: RedflowClient,
    name: str,
    payload: Any,
    idempotency_key: str | None,
    available_at: int | None,
    def_ids: Iterable[str],
    idempotency_ttl: int,
) -> list[str]:
    run_ids = []
    for sub in event_defs(client, def_ids):
        target = client.resolve_workflow(sub.workflow)
        handle = client._enqueue(
            target,
            client.prepare_input(target, payload),
            idempotency_key=event_run_idempotency_key(name, idempotency_key) if idempotency_key else None,
            queue=sub.queue,
            available_at=available_at,
            max_attempts=None,
            parent_run_id=None,
            idempotency_ttl=idempotency_ttl,
        )
        run_ids.append(handle.id)
    return run_ids


def _payload_json(name: str, payload: Any) -> str:
    try:
        return codec.dumps(payload)
    except SerializationError as exc:
        raise InputValidationError(f"payload of event {name!r} is not JSON-serializable: {exc}") from exc
