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

Each workflow's retention is read from its metadata (``retentionJson``,
written at sync), so a worker applies the right retention to workflows it
does not run; workflows that stored none get the worker's default. One
worker at a time cleans (a leader lock), and a pass reads at most ``page``
index entries plus the ``max_finished`` excess, so it stays bounded however
much is due.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redflow.core import codec
from redflow.core.models import WorkflowField, retention_from_json
from redflow.core.retention import FINISHED_STATUSES, Retention
from redflow.engine.leader import LeaderLock
from redflow.store.purge import Seen, purge_runs, read_runs

if TYPE_CHECKING:
    from redflow.client import RedflowClient

log = logging.getLogger("redflow.retention")

INTERVAL_S = 1.0
PAGE = 500
MIN_LANE_PAGE = 50
LOCK_MS = 10_000
TABLE_TTL_S = 10.0
#: Stands for "workflows that stored no retention" in a lane's members.
DEFAULT_MEMBER = "*"
#: Index entries as ZRANGEBYSCORE WITHSCORES returns them: (run id, score).
Page = list[tuple[str, float]]


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


@dataclass(slots=True)
class Cursor:
    """Where a lane is: past (score, member), with ``kept`` entries at that
    score left in place (they size the next read); ``members`` a lane has served."""

    score: float | None = None
    member: str = ""
    kept: int = 0
    members: frozenset[str] = frozenset()

    @classmethod
    def load(cls, raw: str | None, lane: Lane) -> tuple[Cursor, bool]:
        """The stored cursor of ``lane``, or a fresh one (and True: store it)
        when there is none, it does not read, or a workflow joined the lane
        since (its older runs may be due now: the walk starts again once)."""
        record = codec.try_loads(raw)
        members: frozenset[str] = frozenset()
        if isinstance(record, dict):
            members = frozenset(m for m in record.get("workflows") or () if isinstance(m, str))
            score, kept = record.get("score"), record.get("kept")
            if lane.members <= members and (score is None or isinstance(score, int | float)) and isinstance(kept, int):
                return cls(score, str(record.get("member") or ""), kept, members), False
        # The union: workers whose tables differ for a moment do not restart the lane in turn.
        return cls(members=members | lane.members), True

    def dump(self) -> str:
        return codec.dumps({"score": self.score, "member": self.member, "kept": self.kept, "workflows": sorted(self.members)})

    def is_behind(self, member: str, score: float) -> bool:
        """Whether an entry read again was already handled by this cursor."""
        return self.score is not None and score == self.score and member <= self.member


class RetentionCleaner:
    """The worker loop's step; see the module docstring."""

    def __init__(self, client: RedflowClient, *, default: Retention, interval_s: float = INTERVAL_S, page: int = PAGE) -> None:
        self.client = client
        self.default = default
        self.interval_s = interval_s
        self.page = page
        self.lock = LeaderLock(client.scripts, client.redis, client.keys.lock_retention(), lock_ms=LOCK_MS)
        self._table: dict[str, Retention] = {}
        self._queues: list[str | None] = [None]
        self._table_read_at = float("-inf")
        self._full: set[str] = set()  # lanes whose last page came back full
        self.purged = 0

    def step(self) -> float:
        if not self.lock.hold():
            return self.interval_s
        self._refresh()
        now = self.client.now_ms()
        busy = self._expire(now)
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
        client, keys = self.client, self.client.keys
        names = sorted(client.redis.smembers(keys.workflows()))
        pipe = client.redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(keys.workflow(name), WorkflowField.RETENTION_JSON)
        self._table = {name: retention_from_json(raw) or self.default for name, raw in zip(names, pipe.execute())}
        self._queues = list(client.known_queues()) if keys.cluster else [None]
        self._table_read_at = time.monotonic()

    def lanes(self) -> list[Lane]:
        members: dict[tuple[str, int], set[str]] = {}
        for status in FINISHED_STATUSES:
            for name, retention in [*self._table.items(), (DEFAULT_MEMBER, self.default)]:
                keep_ms = retention.keep_ms(status)
                if keep_ms is not None:
                    members.setdefault((status, keep_ms), set()).add(name)
        return [Lane(queue, status, keep_ms, frozenset(names)) for queue in self._queues for (status, keep_ms), names in members.items()]

    def _expire(self, now: int) -> bool:
        """One page of every lane; returns whether a lane had more to read."""
        lanes = self.lanes()
        if not lanes:
            return False
        redis, keys = self.client.redis, self.client.keys
        loaded = [Cursor.load(raw, lane) for lane, raw in zip(lanes, redis.hmget(keys.retention_cursors(), [ln.field for ln in lanes]))]
        sizes = self._page_sizes(lanes)
        pipe = redis.pipeline(transaction=False)
        for lane, (cursor, _), size in zip(lanes, loaded, sizes):
            low = "-inf" if cursor.score is None else cursor.score
            pipe.zrangebyscore(keys.runs_status(lane.status, lane.queue), low, now - lane.keep_ms, 0, cursor.kept + size, True)
        pages: list[Page] = pipe.execute()
        fresh = [[(m, s) for m, s in page if not cursor.is_behind(m, s)] for page, (cursor, _) in zip(pages, loaded)]
        runs = read_runs(redis, keys, [(lane.queue, member) for lane, entries in zip(lanes, fresh) for member, _ in entries])
        verdicts = iter(runs)
        due = [run for lane, entries in zip(lanes, fresh) for _ in entries for run in [next(verdicts)] if self._is_due(run, lane)]
        purged, removed = purge_runs(self.client.scripts, redis, due)
        self._count(purged, "ended longer ago than their retention")
        self._save_cursors(lanes, loaded, pages, removed)
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

    def _save_cursors(
        self, lanes: list[Lane], loaded: list[tuple[Cursor, bool]], pages: list[list[tuple[str, float]]], removed: set[str]
    ) -> None:
        changed: dict[str, str] = {}
        for lane, (cursor, fresh_cursor), page in zip(lanes, loaded, pages):
            if page:
                member, score = page[-1]
                kept = sum(1 for m, s in page if s == score and m not in removed)
                cursor = Cursor(score, max(member, cursor.member) if score == cursor.score else member, kept, cursor.members)
            if page or fresh_cursor:
                changed[lane.field] = cursor.dump()
        if changed:
            self.client.redis.hset(self.client.keys.retention_cursors(), mapping=changed)

    def _cap(self) -> bool:
        """``max_finished``: the oldest finished runs of a workflow over its cap
        go, a page per workflow a pass; returns whether some were left."""
        capped = [(name, queue, r.max_finished) for name, r in self._table.items() if r.max_finished for queue in self._queues]
        if not capped:
            return False
        redis, keys = self.client.redis, self.client.keys
        pipe = redis.pipeline(transaction=False)
        for name, queue, _ in capped:
            pipe.zcard(keys.workflow_runs(name, queue))
        over = [(name, queue, count - cap) for (name, queue, cap), count in zip(capped, pipe.execute()) if count > cap]
        if not over:
            return False
        pipe = redis.pipeline(transaction=False)
        for name, queue, excess in over:
            pipe.zrange(keys.workflow_runs(name, queue), 0, min(excess, self.page) - 1)
        due: list[Seen] = []
        for (name, queue, _), ids in zip(over, pipe.execute()):
            runs = read_runs(redis, keys, [(queue, run_id) for run_id in ids], workflow=name)
            due.extend(run for run in runs if run.status is None or run.finished_ms is not None)
        purged, _ = purge_runs(self.client.scripts, redis, due)
        self._count(purged, "over their workflow's max_finished")
        return purged > 0 and any(excess > self.page for _, _, excess in over)

    def _count(self, purged: int, why: str) -> None:
        if purged:
            self.purged += purged
            log.debug("retention: deleted %d finished run(s) %s", purged, why)
