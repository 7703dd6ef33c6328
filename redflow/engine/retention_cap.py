"""``max_finished``: the retention cleaner's walk of a capped workflow's runs.

When a workflow's ``workflow-runs`` index (by creation time) holds more runs
than its cap, the oldest finished ones go. Live runs count toward the cap
and are stepped over, as are children whose parent is unfinished
(store/purge.py). The walk keeps a cursor per (workflow, queue) in
``P:retention:cap-cursors``: each pass reads one page from where the last
one stopped, deletes finished runs up to the excess, and moves on; when it
reaches the newest run it starts over from the oldest, where runs it
stepped over may have ended since. So however many live runs head the index
(a page of them or a hundred thousand), the finished runs behind them are
reached: a pass never reads the same stuck page again. A run still live
when the walk passed it goes when the walk comes round again.

Cost: nothing on the hot path (the index is the one every enqueue writes);
per pass and per capped workflow over its cap, one ZCARD, one HMGET of the
cursors, one page read (ZRANGEBYSCORE, then one HMGET per entry, pipelined),
the purge, and one HSET of the moved cursors. A page is the excess (at
least 50, at most the cleaner's page), so stepping over N live runs takes
N / page passes per round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redflow.core.keys import enc
from redflow.core.retention import Retention
from redflow.engine.retention_cursor import Cursor, Page
from redflow.store.purge import Seen, purge_runs, read_runs
from redflow.store.scripts import Scripts

MIN_PAGE = 50  # as a lane's small page


@dataclass(slots=True)
class _Walk:
    """One capped (workflow, queue) over its cap in this pass, and the page it read."""

    workflow: str
    queue: str | None
    excess: int
    cursor: Cursor
    size: int
    page: Page
    decided: int = 0  # entries of the fresh page decided (deleted or stepped over)
    due: tuple[Seen, ...] = ()

    @property
    def fresh(self) -> Page:
        return self.cursor.fresh(self.page)

    @property
    def full(self) -> bool:
        """Whether the page read was full: the index goes on past it."""
        return len(self.page) >= self.cursor.kept + self.size

    @property
    def more(self) -> bool:
        """Whether this walk is short of its excess with more of the index to read."""
        return len(self.due) < self.excess and self.full

    def decide(self, runs: Sequence[Seen]) -> None:
        """Take finished runs (and leftovers) in index order, up to the excess."""
        due: list[Seen] = []
        for run in runs:
            if len(due) >= self.excess:
                break
            self.decided += 1
            if run.status is None or run.finished_ms is not None:
                due.append(run)
        self.due = tuple(due)

    def moved(self, removed: frozenset[str]) -> Cursor:
        """The cursor after this pass: past the last entry decided, or back to
        the start once the walk decided the newest entry of the index."""
        fresh = self.fresh
        if not self.full and self.decided == len(fresh):
            return Cursor()
        # a full page of entries handled before (none decided): past them all
        member, score = fresh[self.decided - 1] if self.decided else self.page[-1]
        return self.cursor.past(self.page, member, score, removed)


def cap_pass(scripts: Scripts, redis: Any, capped: Sequence[tuple[str, str | None, int]], page: int) -> tuple[int, bool]:
    """One page of the walk of each ``(workflow, queue, max_finished)`` that is
    over its cap; returns how many runs were deleted and whether a walk
    deleted some and has more to read (come back at once)."""
    if not capped:
        return 0, False
    keys = scripts.keys
    pipe = redis.pipeline(transaction=False)
    for name, queue, _ in capped:
        pipe.zcard(keys.workflow_runs(name, queue))
    over = [(name, queue, count - cap) for (name, queue, cap), count in zip(capped, pipe.execute()) if count > cap]
    if not over:
        return 0, False
    raws = redis.hmget(keys.retention_cap_cursors(), [_field(name, queue) for name, queue, _ in over])
    plans = [(name, queue, excess, Cursor.load(raw)[0], min(page, max(MIN_PAGE, excess))) for (name, queue, excess), raw in zip(over, raws)]
    pipe = redis.pipeline(transaction=False)
    for name, queue, _, cursor, size in plans:
        pipe.zrangebyscore(keys.workflow_runs(name, queue), cursor.low, "+inf", 0, cursor.kept + size, True)
    walks = [_Walk(*plan, page=entries) for plan, entries in zip(plans, pipe.execute())]
    for walk in walks:
        walk.decide(read_runs(redis, keys, [(walk.queue, member) for member, _ in walk.fresh], workflow=walk.workflow))
    outcome = purge_runs(scripts, redis, [run for walk in walks for run in walk.due])
    cursors = [(walk, walk.moved(outcome.removed)) for walk in walks]
    moved = {_field(walk.workflow, walk.queue): cursor.dump() for walk, cursor in cursors if cursor != walk.cursor}
    if moved:
        redis.hset(keys.retention_cap_cursors(), mapping=moved)
    return outcome.count, outcome.count > 0 and any(walk.more for walk in walks)


def _field(workflow: str, queue: str | None) -> str:
    """A walk's field in ``P:retention:cap-cursors`` (the queue length-prefixed: no two read alike)."""
    return f"{enc(queue or '')}{workflow}"


def capped_workflows(table: dict[str, Retention], queues: Sequence[str | None]) -> list[tuple[str, str | None, int]]:
    """``(workflow, queue, max_finished)`` of every capped workflow, per queue."""
    return [(name, queue, r.max_finished) for name, r in table.items() if r.max_finished for queue in queues]
