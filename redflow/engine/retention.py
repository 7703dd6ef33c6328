"""The retention cleaner: deletes finished runs whose retention has passed.

Nothing is added to the hot path: a settle writes no expiry. The cleaner
finds due runs through the indexes the engine keeps anyway: each terminal
``runs:status:<status>`` zset is scored by the time the run ended. Retention
differs per workflow and status, so one walk ("lane") per (status, distinct
retention value) reads the entries that ended more than that retention ago,
deletes those whose own retention is no longer, and moves its cursor on. A
run of a longer retention is stepped over once per lane and found again by
the lane of its own value; a cursor is kept in Redis
(``P:retention:cursors``) so a restart resumes where it was, and a lane
starts again from the beginning once when a workflow joins it.

A child whose parent is unfinished is kept (store/purge.py): a lane walks
on past it and notes it in ``P:retention:held`` (engine/retention_holds.py),
looked at again until its parent has ended. ``max_finished`` is a walk of
its own over each capped workflow's runs (engine/retention_cap.py).

Each workflow's retention is read from its metadata (``retentionJson``,
written at sync), so a worker applies the right retention to workflows it
does not run; workflows that stored none get the worker's default. One
worker at a time cleans (a leader lock), and a pass reads at most ``page``
index entries, ``page`` held children a queue, and a page of each capped
workflow over its cap, so it stays bounded however much is due.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from redflow.core.models import WorkflowField, retention_from_json
from redflow.core.retention import FINISHED_STATUSES, Retention
from redflow.engine import retention_holds
from redflow.engine.leader import LeaderLock
from redflow.engine.retention_cap import cap_pass, capped_workflows
from redflow.engine.retention_cursor import Cursor, Page
from redflow.store.port import Store
from redflow.store.purge import Seen, purge_runs, read_runs
from redflow.store.reads import known_queues

log = logging.getLogger("redflow.retention")

INTERVAL_S = 5.0
PAGE = 500
MIN_LANE_PAGE = 50
LOCK_MS = 10_000
TABLE_TTL_S = 60.0  # one HGET per workflow: a changed retention applies within a minute
#: Stands for "workflows that stored no retention" in a lane's members.
DEFAULT_MEMBER = "*"


@dataclass(frozen=True, slots=True)
class Lane:
    """One walk of a terminal status index: runs that ended more than ``keep_ms`` ago."""

    queue: str | None
    status: str
    keep_ms: int
    members: frozenset[str]  # workflows of that retention (DEFAULT_MEMBER: the default)

    @property
    def field(self) -> str:
        return f"{self.queue or ''}|{self.status}|{self.keep_ms}"


class RetentionCleaner:
    """The worker loop's step; see the module docstring."""

    def __init__(self, store: Store, *, default: Retention, interval_s: float = INTERVAL_S, page: int = PAGE) -> None:
        self.store = store
        self.default = default
        self.interval_s = interval_s
        self.page = page
        self.lock = LeaderLock(store.scripts, store.redis, store.keys.lock_retention(), lock_ms=LOCK_MS)
        self._table: dict[str, Retention] = {}
        self._queues: list[str | None] = [None]
        self._table_read_at = float("-inf")
        self._full: set[str] = set()  # lanes whose last page came back full
        self.purged = 0

    def step(self) -> float:
        if not self.lock.hold():
            return self.interval_s
        self._refresh()
        now_ms = self.store.now_ms()
        busy = self._expire(now_ms)
        busy = self._release(now_ms) or busy
        busy = self._cap() or busy
        return 0.0 if busy else self.interval_s

    def stop(self) -> None:
        self.lock.release()

    def retention_of(self, workflow: str) -> Retention:
        return self._table.get(workflow, self.default)

    def _refresh(self) -> None:
        """Every workflow's stored retention (and the queues), re-read every TABLE_TTL_S."""
        if time.monotonic() - self._table_read_at < TABLE_TTL_S:
            return
        store, keys = self.store, self.store.keys
        names = sorted(store.redis.smembers(keys.workflows()))
        pipe = store.pipeline()
        for name in names:
            pipe.hget(keys.workflow(name), WorkflowField.RETENTION_JSON)
        self._table = {name: retention_from_json(raw) or self.default for name, raw in zip(names, pipe.execute())}
        self._queues = list(known_queues(store)) if keys.cluster else [None]
        self._table_read_at = time.monotonic()

    def lanes(self) -> list[Lane]:
        members: dict[tuple[str, int], set[str]] = {}
        for status in FINISHED_STATUSES:
            for name, retention in [*self._table.items(), (DEFAULT_MEMBER, self.default)]:
                keep_ms = retention.keep_ms(status)
                if keep_ms is not None:
                    members.setdefault((status, keep_ms), set()).add(name)
        return [Lane(queue, status, keep_ms, frozenset(names)) for queue in self._queues for (status, keep_ms), names in members.items()]

    def _expire(self, now_ms: int) -> bool:
        """One page of every lane; returns whether a lane had more to read."""
        lanes = self.lanes()
        if not lanes:
            return False
        redis, keys = self.store.redis, self.store.keys
        raws = redis.hmget(keys.retention_cursors(), [ln.field for ln in lanes])
        loaded = [Cursor.load(raw, lane.members) for lane, raw in zip(lanes, raws)]
        sizes = self._page_sizes(lanes)
        pipe = redis.pipeline(transaction=False)
        for lane, (cursor, _), size in zip(lanes, loaded, sizes):
            pipe.zrangebyscore(keys.runs_status(lane.status, lane.queue), cursor.low, now_ms - lane.keep_ms, 0, cursor.kept + size, True)
        pages: list[Page] = pipe.execute()
        fresh = [cursor.fresh(page) for page, (cursor, _) in zip(pages, loaded)]
        runs = read_runs(redis, keys, [(lane.queue, member) for lane, entries in zip(lanes, fresh) for member, _ in entries])
        verdicts = iter(runs)
        due = [run for lane, entries in zip(lanes, fresh) for _ in entries for run in [next(verdicts)] if self._is_due(run, lane)]
        outcome = purge_runs(self.store.scripts, redis, due)
        retention_holds.hold(redis, self.store.scripts, outcome.held, now_ms)  # the lane walks on: looked at again there
        self._count(outcome.count, "ended longer ago than their retention")
        self._save_cursors(lanes, loaded, pages, outcome.removed)
        self._full = {lane.field for lane, page, (cursor, _), size in zip(lanes, pages, loaded, sizes) if len(page) >= cursor.kept + size}
        return bool(self._full)

    def _page_sizes(self, lanes: list[Lane]) -> list[int]:
        """Lanes whose last page came back full share the page; the others get a
        small one (most lanes have nothing due most of the time)."""
        busy = sum(1 for lane in lanes if lane.field in self._full)
        shared = max(MIN_LANE_PAGE, self.page // max(1, busy))
        return [shared if lane.field in self._full else MIN_LANE_PAGE for lane in lanes]

    def _is_due(self, run: Seen, lane: Lane) -> bool:
        """Due under ``lane``: still in its status (or its hash is gone: a
        leftover), and kept no longer than the lane's retention."""
        if run.status is None:
            return True
        keep_ms = self.retention_of(run.workflow).keep_ms(lane.status)
        return run.status == lane.status and keep_ms is not None and keep_ms <= lane.keep_ms

    def _save_cursors(self, lanes: list[Lane], loaded: list[tuple[Cursor, bool]], pages: list[Page], removed: frozenset[str]) -> None:
        changed: dict[str, str] = {}
        for lane, (cursor, fresh_cursor), page in zip(lanes, loaded, pages):
            if page:
                cursor = cursor.past(page, *page[-1], removed)
            if page or fresh_cursor:
                changed[lane.field] = cursor.dump()
        if changed:
            self.store.redis.hset(self.store.keys.retention_cursors(), mapping=changed)

    def _release(self, now_ms: int) -> bool:
        """Children held for their parent that are due for a look; returns whether more were due."""
        store = self.store
        purged, more = retention_holds.release_pass(store.scripts, store.redis, self._queues, self.retention_of, now_ms, self.page)
        self._count(purged, "kept until their parent ended")
        return more

    def _cap(self) -> bool:
        """``max_finished``: a page of each capped workflow's walk; returns whether one has more."""
        purged, more = cap_pass(self.store.scripts, self.store.redis, capped_workflows(self._table, self._queues), self.page)
        self._count(purged, "over their workflow's max_finished")
        return more

    def _count(self, purged: int, why: str) -> None:
        if purged:
            self.purged += purged
            log.debug("retention: deleted %d finished run(s) %s", purged, why)
