"""Filtered run listings answered from indexes: newest first, in pages with a cursor.

A filter (workflow, status, tags) names the indexes a matching run must be
in (see :meth:`RunFilter.indexes`): one exact index where there is one (runs
of a workflow, in a status, with a tag; failed or canceled runs of a
workflow or a tag), else several. The smallest is walked newest first by
``search_runs.lua``, which keeps the entries that are also in the others
(ZMSCORE, in batches). Every page does bounded work: it stops after
``limit`` matches or after :data:`PAGE_SKIP` entries that did not match, so
a page answers in milliseconds whatever the data; a short page with a
cursor means "more may match further back". No index is kept per status
for every run (that would cost the worker's hot path commands): a status
filter on a big workflow is a walk, bounded as above.

The cursor is ``<filter fingerprint>:<walked index>:<score>:<run id>``, the
last entry a page examined; the next page continues after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.core.keys import RUN_STATUSES, Keys
from redflow.core.models import PAYLOAD_FIELDS, Run, RunField
from redflow.core.tags import tags_of, validate_tags
from redflow.store.payloads import read_many_blobs
from redflow.store.scripts import Scripts

#: Entries the script reads per step (ZRANGE + ZMSCORE of this many ids).
SEARCH_BATCH = 500
#: Matches and non-matching entries one script call may take: a few ms of Redis.
CALL_WANTED = 1000
CALL_SKIP = 2000
#: Non-matching entries one page may examine: what bounds a page's latency.
PAGE_SKIP = 6_000
#: A first page whose smallest index has at most this many entries asks Redis
#: for the size of the intersection first (ZINTERCARD, in C: about ten times
#: the speed of the walk); when at most a page matches, it is read at once
#: (ZINTER), so "nothing matches" and "a few match" cost one pass in C.
INTERSECT_MAX = 25_000
#: Statuses with an index per workflow and per tag (written where runs end so).
TERMINAL_INDEXED = ("failed", "canceled")

_STATUSES = frozenset(RUN_STATUSES)


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What ``list_runs``, ``retry_many`` and ``cancel_many`` select; all given parts must hold."""

    workflow: str | None = None
    status: str | None = None
    tags: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, workflow: str | None = None, status: str | None = None, tags: Mapping[str, str] | None = None) -> RunFilter:
        """A checked filter: an unknown status or a bad tag is a :class:`RedflowError`."""
        if status is not None and status not in _STATUSES:
            raise RedflowError(f"unknown run status {status!r}")
        if workflow is not None and (not isinstance(workflow, str) or not workflow):
            raise RedflowError("workflow must be a non-empty string")
        return cls(workflow or None, status, tuple(validate_tags(tags).items()))

    def fingerprint(self) -> str:
        return hashlib.sha256(codec.dumps([self.workflow, self.status, self.tags]).encode()).hexdigest()[:8]

    def indexes(self, keys: Keys, queue: str | None = None) -> list[str]:
        """The indexes a matching run is in, every one of them (see the module docstring)."""
        w, s, tags = self.workflow, self.status, self.tags
        if s in TERMINAL_INDEXED:
            found = [keys.workflow_status(s, w, queue)] if w else []
            found += [keys.tag_status(s, k, v, queue) for k, v in tags]
            return found or [keys.runs_status(s, queue)]
        found = [keys.workflow_tag(w, k, v, queue) if w else keys.tag(k, v, queue) for k, v in tags]
        if w and not tags:
            found.append(keys.workflow_runs(w, queue))
        if s:
            found.append(keys.runs_status(s, queue))
        return found or [keys.runs_created(queue)]

    def holds(self, run: Run) -> bool:
        """Whether a run read back still matches (it may have moved since the index was read)."""
        if (self.workflow and run.workflow != self.workflow) or (self.status and run.status != self.status):
            return False
        return all(run.tags.get(k) == v for k, v in self.tags)


@dataclass(frozen=True, slots=True)
class Entry:
    """An index entry of a matching run: its score in the walked index, id and queue."""

    score: float
    run_id: str
    queue: str | None

    def order(self) -> tuple[float, str]:
        return (self.score, self.run_id)


@dataclass(frozen=True, slots=True)
class Scan:
    """Matching entries, newest first; ``cursor`` (None: nothing more) and entries examined."""

    entries: list[Entry]
    cursor: str | None
    examined: int


class RunList(list[Run]):
    """A page of runs (a plain list) with ``cursor``: pass it back for the next
    page; ``None`` when no more runs match. ``examined``: index entries read."""

    cursor: str | None = None
    examined: int = 0


class RunSearch:
    """Pages of runs matching a :class:`RunFilter`, over the given queues' indexes
    (``[None]`` outside cluster mode: one global set of indexes)."""

    def __init__(self, redis: Any, keys: Keys, scripts: Scripts) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = scripts

    def page(self, flt: RunFilter, queues: Sequence[str | None], *, limit: int = 100, cursor: str | None = None) -> RunList:
        """Up to ``limit`` runs, newest first, after ``cursor``."""
        if not isinstance(limit, int) or limit < 1:
            raise RedflowError("limit must be an int >= 1")
        scan = self.scan(flt, queues, wanted=limit, cursor=cursor, skip_budget=PAGE_SKIP)
        out = RunList()
        if scan.entries:
            pipe = self.redis.pipeline(transaction=False)
            for entry in scan.entries:
                pipe.hgetall(self.keys.run(entry.run_id, entry.queue))
            found = [(entry, fields) for entry, fields in zip(scan.entries, pipe.execute()) if fields]  # purged meanwhile: skipped
            wanted = [(self.keys.run_blobs(e.run_id, e.queue), [fields.get(name) for name in PAYLOAD_FIELDS]) for e, fields in found]
            for (entry, fields), blobs in zip(found, read_many_blobs(self.redis, wanted)):
                run = Run.from_hash(entry.run_id, fields, blobs=blobs)
                if flt.holds(run):
                    out.append(run)
        out.cursor, out.examined = scan.cursor, scan.examined
        return out

    def scan(self, flt: RunFilter, queues: Sequence[str | None], *, wanted: int, cursor: str | None, skip_budget: int) -> Scan:
        """Matching entries after ``cursor``: at most ``wanted``, and at most
        ``skip_budget`` non-matching entries examined per queue."""
        per_queue = {queue: flt.indexes(self.keys, queue) for queue in queues}
        cards = self._cards(per_queue)
        totals = [sum(column) for column in zip(*cards.values())]
        after: tuple[str, str] | None = None
        if cursor is not None:
            position, after = _decode(cursor, flt)
            if position >= len(totals):
                raise RedflowError("the cursor does not fit this filter")
        else:
            position = min(range(len(totals)), key=lambda i: totals[i])  # walk the smallest
            if totals[position] == 0:
                return Scan([], None, 0)
        order = sorted((i for i in range(len(totals)) if i != position), key=lambda i: totals[i])  # probe the smallest first
        results = []
        for queue, indexes in per_queue.items():
            walk, probes = indexes[position], [indexes[i] for i in order]
            if after is None and probes and cards[queue][position] <= INTERSECT_MAX:
                results.append((queue, *self._intersect(walk, probes, wanted, skip_budget, cards[queue][position])))
            else:
                results.append((queue, *self._walk(walk, probes, after, wanted, skip_budget)))
        return _merge(flt, position, results, wanted)

    def _cards(self, per_queue: Mapping[str | None, list[str]]) -> dict[str | None, list[int]]:
        """Each index's size, per queue, in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for indexes in per_queue.values():
            for key in indexes:
                pipe.zcard(key)
        sizes = iter(pipe.execute())
        return {queue: [next(sizes) for _ in indexes] for queue, indexes in per_queue.items()}

    def _intersect(
        self, walk: str, probes: list[str], wanted: int, skip_budget: int, card: int
    ) -> tuple[list[tuple[str, float]], tuple[str, str] | None, bool, int]:
        """A first page from Redis's own intersection (see :data:`INTERSECT_MAX`), or the walk when more than a page matches."""
        keys = [walk, *probes]
        try:
            size = self.redis.zintercard(len(keys), keys, limit=wanted + 1)
        except ResponseError:  # a Redis before 7.0: no ZINTERCARD
            size = wanted + 1
        if size > wanted:  # dense: the walk finds a page at once
            return self._walk(walk, probes, None, wanted, skip_budget)
        found = self.redis.zinter({key: (1 if key == walk else 0) for key in keys}, withscores=True) if size else []
        return [(run_id, score) for run_id, score in reversed(found)], None, True, card

    def _walk(
        self, walk: str, probes: list[str], after: tuple[str, str] | None, wanted: int, skip_budget: int
    ) -> tuple[list[tuple[str, float]], tuple[str, str] | None, bool, int]:
        """Bounded script calls until ``wanted`` matches, the budget or the index's end."""
        matches: list[tuple[str, float]] = []
        examined = 0
        while True:
            skipped = examined - len(matches)
            step = self.scripts.search_runs(
                walk=walk,
                probes=probes,
                after=after,
                wanted=min(wanted - len(matches), CALL_WANTED),
                skip_budget=min(skip_budget - skipped, CALL_SKIP),
                batch=SEARCH_BATCH,
            )
            matches += step.matches
            examined += step.examined
            after = step.last or after
            if step.exhausted:
                return matches, after, True, examined
            if len(matches) >= wanted or examined - len(matches) >= skip_budget:
                return matches, after, False, examined

    def iter_entries(self, flt: RunFilter, queues: Sequence[str | None], *, batch: int = 500) -> Iterator[list[Entry]]:
        """Every matching entry, ``batch`` at a time, newest first (bulk actions)."""
        cursor: str | None = None
        while True:
            scan = self.scan(flt, queues, wanted=batch, cursor=cursor, skip_budget=4 * CALL_SKIP)
            if scan.entries:
                yield scan.entries
            if scan.cursor is None:
                return
            cursor = scan.cursor

    def count(self, flt: RunFilter, queues: Sequence[str | None]) -> int:
        """How many runs match: the index's size when one index answers, else a walk."""
        per_queue = [flt.indexes(self.keys, queue) for queue in queues]
        if all(len(indexes) == 1 for indexes in per_queue):
            pipe = self.redis.pipeline(transaction=False)
            for indexes in per_queue:
                pipe.zcard(indexes[0])
            return int(sum(pipe.execute()))
        return sum(len(entries) for entries in self.iter_entries(flt, queues, batch=CALL_WANTED))

    def targets(self, entries: Sequence[Entry]) -> list[tuple[str, list[str]] | None]:
        """Each run's queue and failed / canceled index pairs, what retry and
        cancel scripts need (None: no such run), in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for entry in entries:
            pipe.hmget(self.keys.run(entry.run_id, entry.queue), [RunField.WORKFLOW, RunField.TAGS_JSON, RunField.QUEUE])
        out: list[tuple[str, list[str]] | None] = []
        for entry, (workflow, raw_tags, queue) in zip(entries, pipe.execute()):
            queue = entry.queue or queue or "default"
            out.append(None if workflow is None else (queue, self.keys.terminal_index_keys(workflow, tags_of(raw_tags), queue)))
        return out


def _merge(flt: RunFilter, position: int, results: list[Any], wanted: int) -> Scan:
    """Merge the queues' walks: keep what every unfinished walk has got past
    (runs further back may still be unread in some queue), newest first."""
    frontier: tuple[float, str] | None = None
    entries: list[Entry] = []
    examined = 0
    for queue, matches, last, exhausted, seen in results:
        examined += seen
        entries += [Entry(score, run_id, queue) for run_id, score in matches]
        if not exhausted and last is not None:
            stop = (float(last[0]), last[1])
            frontier = stop if frontier is None or stop > frontier else frontier
    entries.sort(key=Entry.order, reverse=True)
    if frontier is not None:
        entries = [e for e in entries if e.order() >= frontier]
    if len(entries) > wanted:
        entries = entries[:wanted]
        frontier = entries[-1].order()
    cursor = None if frontier is None else _encode(flt, position, frontier)
    return Scan(entries, cursor, examined)


def _encode(flt: RunFilter, position: int, after: tuple[float, str]) -> str:
    score = int(after[0]) if after[0] == int(after[0]) else after[0]
    return f"{flt.fingerprint()}:{position}:{score}:{after[1]}"


def _decode(cursor: str, flt: RunFilter) -> tuple[int, tuple[str, str]]:
    parts = cursor.split(":", 3) if isinstance(cursor, str) else []
    if len(parts) != 4 or not parts[1].isdigit():
        raise RedflowError(f"not a run listing cursor: {str(cursor)[:80]!r}")
    fingerprint, position, score, run_id = parts
    if fingerprint != flt.fingerprint():
        raise RedflowError("this cursor belongs to a listing with other filters")
    try:
        float(score)
    except ValueError:
        raise RedflowError(f"not a run listing cursor: {cursor[:80]!r}") from None
    return int(position), (score, run_id)
