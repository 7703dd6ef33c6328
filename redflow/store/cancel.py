"""Canceling one run by id: ``client.cancel``, and a schedule whose new tick
cancels the run its last tick started (``overlap="cancel_running"``).

A queued or scheduled run is canceled at once; a running one is marked and
its worker stops it. Either way its unfinished children are canceled too
(:mod:`redflow.store.children`), also those of a run canceled already: a
cancel whose caller died before its cascade is finished by the next.
"""

from __future__ import annotations

from redflow.core.models import RunField
from redflow.store import children
from redflow.store.bulk import cancel_error_json
from redflow.store.port import Store
from redflow.store.run_search import Entry


def run_target(store: Store, run_id: str) -> tuple[str, list[str]] | None:
    """A run's queue and failed / canceled index pairs, or None if there is no such run."""
    found, slot_queue = store.locator.slot_queue(run_id)
    return store.search.targets([Entry(0.0, run_id, slot_queue)])[0] if found else None


def cancel_run(store: Store, run_id: str, reason: str | None = None) -> bool:
    """``True`` if the run is canceled now or its worker was told to stop it;
    ``False`` if it already ended or does not exist."""
    target = run_target(store, run_id)
    if target is None:
        return False
    queue, index_keys = target
    outcome = store.scripts.cancel_run(
        run_id=run_id,
        queue=queue,
        now_ms=store.now_ms(),
        reason=reason or "",
        error_json=cancel_error_json(reason),
        index_keys=index_keys,
    )
    if outcome == "terminal" and store.redis.hget(store.keys.run(run_id, queue), RunField.STATUS) == "canceled":
        children.cancel_children(store, run_id, reason=reason)
    if outcome not in children.STOPPED:
        return False
    if outcome == "canceled":
        children.report_child_end(store, run_id, queue)
    children.cancel_children(store, run_id, reason=reason)
    return True
