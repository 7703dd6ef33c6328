"""Children of a run: the cancel cascade and the end a child reports to its parent.

Every run started with a parent (``step.run_workflows``,
``step.run_workflow``) is listed in the parent's children index before it
exists (``store/enqueue.py``). A canceled run's unfinished children are
canceled too, level by level, a child on another queue (on a cluster,
another master) as well; a canceler calls :func:`cancel_children` only once
the run is marked (canceled, or asked to be): a child listed later is the
business of its creator (engine/fence.py). A ``run_workflows`` child tells
its parent when it ends (``child_ended.lua``): the last one to end sends a
parked parent to ready.
"""

from __future__ import annotations

from collections.abc import Sequence

from redflow.core.models import RunField
from redflow.store.bulk import cancel_error_json
from redflow.store.port import Store
from redflow.store.run_search import Entry

#: How many children a cancel cascade cancels per round trip.
CANCEL_BATCH = 100
#: ``cancel_run`` replies of a run that is canceled now, or whose worker was told to stop it.
STOPPED = ("canceled", "requested")


def cancel_children(store: Store, run_id: str, reason: str | None = None) -> int:
    """Cancel the unfinished runs started with ``run_id`` as their parent, and
    theirs, level by level, at most CANCEL_BATCH runs per round trip (a child
    on another queue too); returns how many were canceled or told to stop."""
    return cancel_descendants(store, [run_id], reason)


def cancel_descendants(store: Store, run_ids: Sequence[str], reason: str | None = None) -> int:
    """:func:`cancel_children` of several runs at once (``cancel_many``'s)."""
    error_json, seen, count = cancel_error_json(reason), set(run_ids), 0
    frontier = list(run_ids)
    while frontier:
        children = [child for child in _children_of(store, frontier) if child not in seen]
        seen.update(children)
        frontier = []
        for start in range(0, len(children), CANCEL_BATCH):
            frontier += _cancel_page(store, children[start : start + CANCEL_BATCH], reason, error_json)
        count += len(frontier)
    return count


def _children_of(store: Store, parents: Sequence[str]) -> list[str]:
    """The listed children of ``parents``, CANCEL_BATCH parents per round trip."""
    children: list[str] = []
    for start in range(0, len(parents), CANCEL_BATCH):
        pipe = store.pipeline()
        for key in filter(None, (store.locator.children_key(parent) for parent in parents[start : start + CANCEL_BATCH])):
            pipe.zrange(key, 0, -1)
        children += [child for ids in (pipe.execute() if len(pipe) else []) for child in ids]
    return children


def _cancel_page(store: Store, page: Sequence[str], reason: str | None, error_json: str) -> list[str]:
    """Cancel one page of children; those canceled or told to stop (their children are next)."""
    located = [Entry(0.0, child, queue) for child in page for found, queue in [store.locator.slot_queue(child)] if found]
    # each child's queue and the failed / canceled indexes its cancel joins, one round trip
    chunk = [(entry.run_id, *target) for entry, target in zip(located, store.search.targets(located)) if target]
    if not chunk:
        return []
    batch, now_ms = store.batch(), store.now_ms()
    for child, queue, index_keys in chunk:
        store.scripts.cancel_run(
            run_id=child, queue=queue, now_ms=now_ms, reason=reason or "", error_json=error_json, index_keys=index_keys, conn=batch
        )
    return [child for (child, _, _), outcome in zip(chunk, batch.execute()) if outcome in STOPPED]


def report_child_end(store: Store, run_id: str, queue: str | None) -> None:
    """A ``run_workflows`` child that a client ended: tell its parent (workers do it for the runs they end)."""
    parent_id, parent_queue = store.redis.hmget(store.keys.run(run_id, queue), [RunField.PARENT_RUN_ID, RunField.NOTIFY_PARENT])
    if parent_id and parent_queue:
        tell_parent(store, run_id, parent_id, parent_queue)


def tell_parent(store: Store, child_id: str, parent_id: str, parent_queue: str) -> str:
    """A child ended: note it on its parent (see ``child_ended.lua``)."""
    return store.scripts.child_ended(child_id=child_id, parent_id=parent_id, parent_queue=parent_queue, now_ms=store.now_ms())


def end_for_deadline(store: Store, run_id: str, queue: str, deadline: str, reason: str) -> int:
    """Before a run is settled failed for ``deadline`` (``start`` | ``timeout``):
    mark it (``deadlineExceeded``) and cancel its unfinished children with
    ``reason`` (a cancel may still win the settle; they are canceled either
    way); how many were canceled. Done before the settle, so that a worker dying
    in between leaves the run to be failed, and this done, again."""
    store.redis.hset(store.keys.run(run_id, queue), RunField.DEADLINE_EXCEEDED, deadline)
    return cancel_children(store, run_id, reason)
