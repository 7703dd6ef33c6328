"""Deleting finished runs in bounded batches: shared by the worker's
retention cleaner and ``client.purge`` / ``redflow-gevent runs purge``.

A run is read first (status, finishedAt, workflow: one pipelined HMGET per
run), judged by the caller, then deleted by ``purge_run.lua``, which checks
again inside Redis that the run is still terminal and still the one that was
read, so a run retried meanwhile survives and a live run is never touched.
Every call here sends at most one page of runs per round trip.

A child (a run with a ``parentRunId``: ``step.run_workflows``,
``step.run_workflow``) is never deleted while its parent is unfinished: the
parent replays those steps from its children's records, and a child gone
under it would fail the parent and be started again by its retry. Once the
parent has ended, or is gone, the child follows its own retention. The
parent may be on another hash slot, so this is read before the purge (one
more round trip, only for pages that hold children); a parent that ended
when it was read and is retried by hand before the child's purge finds that
child gone, as it would a moment later.

A run canceled while it waited for an event still has its entry in that
event's waiter index (``P:event:waiters:<event>``, another hash slot); the
purge removes it too, reading the event from the parked step's record first
(one more round trip, only for pages that hold such runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.core.keys import TERMINAL_STATUSES, Keys
from redflow.core.models import WAIT_EVENT, RunField, Wait
from redflow.core.retention import FINISHED_STATUSES, duration_s
from redflow.core.tags import tags_of
from redflow.store.scripts import Scripts

PAGE = 500
_READ_FIELDS = (
    RunField.STATUS,
    RunField.FINISHED_AT,
    RunField.WORKFLOW,
    RunField.TAGS_JSON,
    RunField.PARKED_FOR,
    RunField.PARKED_STEP,
    RunField.PARENT_RUN_ID,
    RunField.NOTIFY_PARENT,
)


@dataclass(frozen=True, slots=True)
class Seen:
    """A run as the purger read it. ``queue`` places its keys (cluster mode;
    None outside it); ``status`` is None when the run hash is gone."""

    run_id: str
    queue: str | None
    status: str | None
    finished_at: str
    workflow: str
    tags: Mapping[str, str] = field(default_factory=dict)  # the run's tags: their indexes name it too
    event_step: str | None = None  # the step it was parked in, waiting for an event (canceled while it waited)
    parent_id: str = ""  # its parent run's id ("" for none)
    parent_queue: str | None = None  # the parent's queue when the run names it (children of run_workflows)

    @property
    def finished_ms(self) -> int | None:
        """finishedAt of a terminal run, or None (live, gone, or not a number)."""
        if self.status not in TERMINAL_STATUSES:
            return None
        try:
            return int(float(self.finished_at))
        except ValueError:
            return None


def read_runs(redis: Any, keys: Keys, entries: Sequence[tuple[str | None, str]], *, workflow: str = "") -> list[Seen]:
    """``(queue, run id)`` pairs as :class:`Seen`, one round trip; ``workflow``
    stands in for the workflow of a run whose hash is gone (so that its entry
    in that workflow's index goes too)."""
    if not entries:
        return []
    pipe = redis.pipeline(transaction=False)
    for queue, run_id in entries:
        pipe.hmget(keys.run(run_id, queue), _READ_FIELDS)
    seen = []
    for (queue, run_id), fields in zip(entries, pipe.execute()):
        status, finished_at, run_workflow, raw_tags, parked_for, parked_step, parent_id, parent_queue = fields
        run_workflow = run_workflow or (workflow if status is None else "")
        event_step = parked_step if parked_for == WAIT_EVENT and parked_step else None
        seen.append(
            Seen(
                run_id, queue, status, finished_at or "", run_workflow, tags_of(raw_tags), event_step, parent_id or "", parent_queue or None
            )
        )
    return seen


def held_by_parents(redis: Any, keys: Keys, runs: Sequence[Seen]) -> set[str]:
    """Ids of the runs among ``runs`` whose parent run is unfinished (see the
    module docstring). One round trip, none when no run has a parent; on a
    cluster one more to find the queue of parents that a child does not name
    (``step.run_workflow``'s) in ``run-queues``: a parent not found there is gone."""
    children = [run for run in runs if run.parent_id]
    if not children:
        return set()
    queues: list[str | None] = [run.parent_queue for run in children]
    lookups = [i for i, queue in enumerate(queues) if keys.cluster and queue is None]
    if lookups:
        found = redis.hmget(keys.run_queues(), [children[i].parent_id for i in lookups])
        for i, queue in zip(lookups, found):
            queues[i] = queue
    located = [(run, queue) for run, queue in zip(children, queues) if queue is not None or not keys.cluster]
    if not located:
        return set()
    pipe = redis.pipeline(transaction=False)
    for run, queue in located:
        pipe.hget(keys.run(run.parent_id, queue), RunField.STATUS)
    return {run.run_id for (run, _), status in zip(located, pipe.execute()) if status is not None and status not in TERMINAL_STATUSES}


@dataclass(frozen=True, slots=True)
class Purged:
    """What :func:`purge_runs` did: how many runs it deleted, the ids that left
    the indexes (those and the leftovers), and the runs it kept because their
    parent is unfinished."""

    count: int = 0
    removed: frozenset[str] = frozenset()
    held: tuple[Seen, ...] = ()


def purge_runs(scripts: Scripts, redis: Any, runs: Iterable[Seen]) -> Purged:
    """Delete ``runs`` (each only if still terminal and as seen, and not a
    child of an unfinished run), one round trip (plus one when some are
    children); a run whose hash is gone already has its leftovers removed."""
    runs = list({(run.queue, run.run_id): run for run in runs}.values())
    if not runs:
        return Purged()
    held_ids = held_by_parents(redis, scripts.keys, runs)
    held = tuple(run for run in runs if run.run_id in held_ids)
    runs = [run for run in runs if run.run_id not in held_ids]
    if not runs:
        return Purged(held=held)
    waits = _event_waits(scripts.keys, redis, runs)
    batch = scripts.batch()
    for run in runs:
        scripts.purge_run(
            run_id=run.run_id,
            queue=run.queue,
            workflow=run.workflow,
            tags=run.tags,
            status=run.status or "",
            finished_at=run.finished_at,
            conn=batch,
        )
    outcomes = batch.execute()
    gone = {run.run_id for run, outcome in zip(runs, outcomes) if outcome in ("purged", "missing")}
    keys = scripts.keys
    if gone and (keys.cluster or waits):
        # The run-queues directory and the waiter indexes live in other slots
        # than the run: removed after the run is gone (a lookup by id then
        # finds no run hash; a delivery, no step to resolve).
        pipe = redis.pipeline(transaction=False)
        if keys.cluster:
            pipe.hdel(keys.run_queues(), *gone)
        for run_id, event in waits.items():
            if run_id in gone:
                pipe.hdel(keys.event_waiters(event), run_id)
        pipe.execute()
    return Purged(sum(1 for outcome in outcomes if outcome == "purged"), frozenset(gone), held)


def _event_waits(keys: Keys, redis: Any, runs: Sequence[Seen]) -> dict[str, str]:
    """Run id -> event, for the runs among ``runs`` parked in an event wait:
    their steps' records name the event (one round trip, none if no such run)."""
    parked = [run for run in runs if run.event_step is not None]
    if not parked:
        return {}
    pipe = redis.pipeline(transaction=False)
    for run in parked:
        pipe.hget(keys.run_steps(run.run_id, run.queue), run.event_step)
    waits = {}
    for run, raw in zip(parked, pipe.execute()):
        wait = Wait.of_record(codec.try_loads(raw)) if raw else None
        if wait is not None and wait.kind == WAIT_EVENT and wait.event:
            waits[run.run_id] = wait.event
    return waits


@dataclass(frozen=True, slots=True)
class PurgeQuery:
    """Which finished runs ``client.purge`` deletes: ended at or before
    ``cutoff_ms``, in one of ``statuses``, of ``workflow`` (None: any)."""

    cutoff_ms: int
    statuses: tuple[str, ...]
    workflow: str | None = None

    @classmethod
    def of(cls, now_ms: int, older_than: float | timedelta, status: str | None, workflow: str | None) -> PurgeQuery:
        """The query ``client.purge`` was asked for, checked: bad arguments raise, nothing is read."""
        seconds = duration_s(older_than, "older_than", zero_ok=True)
        if seconds is None:
            raise RedflowError("older_than is required: purge deletes runs that ended at least that many seconds ago")
        if status is not None and status not in FINISHED_STATUSES:
            raise RedflowError(f"purge deletes finished runs: status must be one of {', '.join(FINISHED_STATUSES)}, not {status!r}")
        if workflow is not None and (not isinstance(workflow, str) or not workflow):
            raise RedflowError("workflow must be a non-empty string")
        return cls(now_ms - round(seconds * 1000), (status,) if status else FINISHED_STATUSES, workflow)

    def matches(self, run: Seen) -> bool:
        finished = run.finished_ms
        if finished is None or finished > self.cutoff_ms or run.status not in self.statuses:
            return False
        return self.workflow is None or run.workflow == self.workflow


def purge_finished(
    scripts: Scripts, redis: Any, query: PurgeQuery, index_queues: Sequence[str | None], *, dry_run: bool = False, page: int = PAGE
) -> int:
    """Delete (or with ``dry_run`` count) every run ``query`` matches, a page a
    round trip. A workflow's runs are found through its ``workflow-runs``
    index (by createdAt, never later than finishedAt); otherwise through the
    status indexes (by the time the run ended). A child of an unfinished run
    is neither deleted nor counted."""
    keys = scripts.keys
    indexes: list[tuple[str | None, str]] = []
    for queue in index_queues:
        if query.workflow is not None:
            indexes.append((queue, keys.workflow_runs(query.workflow, queue)))
        else:
            indexes.extend((queue, keys.runs_status(status, queue)) for status in query.statuses)
    total = 0
    for queue, index in indexes:
        total += _purge_index(scripts, redis, queue, index, query, dry_run=dry_run, page=page)
    return total


def _purge_index(scripts: Scripts, redis: Any, queue: str | None, index: str, query: PurgeQuery, *, dry_run: bool, page: int) -> int:
    """Walk one index up to the cutoff a page at a time; entries left in place
    (live, newer, dry run) are stepped over by the offset."""
    total, offset = 0, 0
    while True:
        ids = redis.zrangebyscore(index, "-inf", query.cutoff_ms, start=offset, num=page)
        runs = read_runs(redis, scripts.keys, [(queue, run_id) for run_id in ids], workflow=query.workflow or "")
        due = [run for run in runs if query.matches(run)]
        if dry_run:
            held = held_by_parents(redis, scripts.keys, due)
            total += sum(1 for run in due if run.run_id not in held)
            offset += len(ids)
        else:
            outcome = purge_runs(scripts, redis, [*due, *(run for run in runs if run.status is None)])
            total += outcome.count
            offset += len(ids) - len(outcome.removed)
        if len(ids) < page:
            return total
