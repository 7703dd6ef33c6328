"""The client's part of durable waits and fan-out (``RedflowClient`` calls these).

Children of ``step.run_workflows`` (started in one batch, read in one round
trip), the cancel cascade (a canceled run's unfinished children, level by
level), ``ctx.progress`` reads, and the delivery of a scheduled event to the
runs waiting for it when it fires. Everything here uses the client's own
connection, keys and scripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redflow.core.keys import new_id, step_workflows_idempotency_key
from redflow.core.models import RunField, decoded
from redflow.handle import STATE_FIELDS, RunState
from redflow.store import event_waiters
from redflow.store.bulk import cancel_error_json
from redflow.store.run_search import Entry
from redflow.store.scripts import Enqueued

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.registry import Workflow

#: How many children a cancel cascade cancels per round trip.
CANCEL_BATCH = 100
#: How long a ``run_workflows`` child's idempotency key lives, as ``client.run``'s.
CHILD_IDEMPOTENCY_TTL_S = 7 * 24 * 3600
_STOPPED = ("canceled", "requested")


def deliver_event(client: RedflowClient, name: str, payload_json: str, fired_at: float) -> list[str]:
    """Deliver an event (JSON payload) to the runs waiting for it since before
    ``fired_at`` (Redis ms), and to no subscriber: how a scheduled event
    reaches its waiters when it fires (late or twice, it reaches no later wait)."""
    waiters = client.redis.hgetall(client.keys.event_waiters(name))
    return event_waiters.deliver(client.scripts, name, payload_json, waiters, client.now_ms(), fired_at) if waiters else []


def start_children(client: RedflowClient, workflow: Workflow | str, inputs: Sequence[Any], *, parent_run_id: str,
                   parent_queue: str, step: str) -> list[str]:  # fmt: skip
    """Start one child run per input for ``step.run_workflows``, in one batch:
    idempotent per parent, step and index (a retried parent starts none
    twice); each child reports its end to the parent. Ids in input order."""
    target = client.resolve_workflow(workflow)
    prepared = [client.prepare_input(target, value) for value in inputs]
    encoded = [input_json for _, input_json in prepared]
    keys = [step_workflows_idempotency_key(parent_run_id, step, target.name, index) for index in range(len(encoded))]
    extra = {RunField.NOTIFY_PARENT: parent_queue}
    children_key, now = client._children_key(parent_run_id), client.now_ms()
    batch, proposed = client.scripts.batch(), [new_id("run") for _ in encoded]
    listing = client.listing_batch(batch, children_key)  # each child is listed before it exists
    for run_id, input_json, key in zip(proposed, encoded, keys):
        client._add_enqueue(
            batch, target, input_json, run_id=run_id, queue=target.queue, now=now, available_at=None, max_attempts=None,
            idempotency_key=key, idempotency_ttl=CHILD_IDEMPOTENCY_TTL_S, replace_id="", parent_run_id=parent_run_id,
            children_key=children_key, extra_fields=extra, listing=listing,
        )  # fmt: skip
    if listing is not batch and proposed:
        listing.execute()
    replies = [reply for reply in batch.execute() if isinstance(reply, Enqueued)] if proposed else []
    ids = []
    for run_id, (value, input_json), key, enqueued in zip(proposed, prepared, keys, replies):
        if enqueued.created:
            ids.append(run_id)
            continue
        # The key names a run already (a replayed step): keep it, or replace it if it failed (client.run's rules).
        client._unlist(run_id, enqueued.run_id, children_key, now)
        handle = client._enqueue(target, (value, input_json), idempotency_key=key, queue=None, available_at=None, max_attempts=None,
                               parent_run_id=parent_run_id, idempotency_ttl=CHILD_IDEMPOTENCY_TTL_S, extra_fields=extra)  # fmt: skip
        ids.append(handle.id)
    return ids


def read_states(client: RedflowClient, run_ids: Sequence[str]) -> list[RunState | None]:
    """``read_state`` of many runs in one round trip (``None`` for a missing run)."""
    located = [client._slot_queue(run_id) for run_id in run_ids]
    pipe = client.redis.pipeline(transaction=False)
    for run_id, (found, queue) in zip(run_ids, located):
        if found:
            pipe.hmget(client.keys.run(run_id, queue), STATE_FIELDS)
    replies = iter(pipe.execute() if len(pipe) else [])
    return [RunState.from_reply(run_id, next(replies)) if found else None for run_id, (found, _) in zip(run_ids, located)]


def get_progress(client: RedflowClient, run_id: str) -> Any:
    """The latest ``ctx.progress`` value of a run, or ``None``."""
    found, queue = client._slot_queue(run_id)
    raw = client.redis.hget(client.keys.run(run_id, queue), RunField.PROGRESS_JSON) if found else None
    return None if raw is None or raw == "" else decoded(raw, f"run {run_id} progressJson")


def cancel_children(client: RedflowClient, run_id: str, reason: str | None = None) -> int:
    """Cancel the unfinished runs started with ``run_id`` as their parent, and
    theirs, level by level, at most CANCEL_BATCH runs per round trip (a child
    on another queue too); returns how many were canceled or told to stop.
    Call it only once ``run_id`` is marked (canceled, or asked to be): a child
    listed later is the business of its creator (engine/fence.py)."""
    return cancel_descendants(client, [run_id], reason)


def cancel_descendants(client: RedflowClient, run_ids: Sequence[str], reason: str | None = None) -> int:
    """:func:`cancel_children` of several runs at once (``cancel_many``'s)."""
    error_json, seen, count = cancel_error_json(reason), set(run_ids), 0
    frontier = list(run_ids)
    while frontier:
        children: list[str] = []
        for start in range(0, len(frontier), CANCEL_BATCH):
            pipe = client.redis.pipeline(transaction=False)
            for key in filter(None, (client._children_key(parent) for parent in frontier[start : start + CANCEL_BATCH])):
                pipe.zrange(key, 0, -1)
            children += [child for ids in (pipe.execute() if len(pipe) else []) for child in ids if child not in seen]
        seen.update(children)
        frontier = []
        for start in range(0, len(children), CANCEL_BATCH):
            page = children[start : start + CANCEL_BATCH]
            located = [Entry(0.0, child, queue) for child in page for found, queue in [client._slot_queue(child)] if found]
            # each child's queue and the failed / canceled indexes its cancel joins, one round trip
            chunk = [(entry.run_id, *target) for entry, target in zip(located, client.search.targets(located)) if target]
            batch, now = client.scripts.batch(), client.now_ms()
            for child, queue, index_keys in chunk:
                client.scripts.cancel_run(run_id=child, queue=queue, now=now, reason=reason or "", error_json=error_json,
                                          index_keys=index_keys, conn=batch)  # fmt: skip
            frontier += [child for (child, _, _), outcome in zip(chunk, batch.execute() if chunk else []) if outcome in _STOPPED]
        count += len(frontier)
    return count


def report_child_end(client: RedflowClient, run_id: str, queue: str) -> None:
    """A ``run_workflows`` child that a client ended: tell its parent (workers do it for the runs they end)."""
    parent_id, parent_queue = client.redis.hmget(client.keys.run(run_id, queue), [RunField.PARENT_RUN_ID, RunField.NOTIFY_PARENT])
    if parent_id and parent_queue:
        client.scripts.child_ended(child_id=run_id, parent_id=parent_id, parent_queue=parent_queue, now=client.now_ms())
