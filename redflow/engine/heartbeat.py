"""The worker registry and the chart tallies: one background loop per worker.

Every ``heartbeat_s`` seconds a worker writes its record (``P:worker:<id>``,
a JSON string with PX, and its id in the ``P:workers`` index), samples the
length of DEPTH_SAMPLES of its queues' ready lists (in turn: a queue's depth
is sampled every few beats, so a beat's cost does not grow with the
queues), and adds what it counted since the last beat to the chart buckets
(:mod:`redflow.core.tally`; a depth is written when it changed): one
pipelined round trip per beat, none per run. A graceful stop deletes the record; a worker
that dies without one is shown as lost until its record expires.

The attempts are counted in memory by :meth:`Heartbeat.count`, which the
worker calls as each attempt ends: two bin lookups and two dictionary increments.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from redflow.core import tally
from redflow.core.keys import Keys
from redflow.core.models import RUNNING_NAMED, WorkerRecord
from redflow.engine.rotation import Rotation
from redflow.store.port import Store

if TYPE_CHECKING:
    from redflow.engine.attempt import Attempt
    from redflow.engine.decide import Outcome
    from redflow.engine.loops import Loop

log = logging.getLogger("redflow.heartbeat")

DEFAULT_BEAT_S = 2.0
#: Ready lists a beat samples the length of (in turn over the worker's queues).
DEPTH_SAMPLES = 5
#: How long a record outlives its worker's last beat (so a lost worker stays visible that long).
RECORD_TTL_S = 300.0
#: Outcomes whose attempt ran the handler: their durations are charted.
_TIMED = frozenset({"succeeded", "failed", "retried", "canceled"})
#: Workflow name the tallies use for runs of workflows this worker does not know
#: (so a producer's stray names cannot grow the bucket hashes without bound).
UNKNOWN_WORKFLOW = "(unknown)"


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """What changes between beats, as the worker reports it."""

    busy: int
    done: int
    failed: int
    stopping: bool
    running: tuple[tuple[str, str], ...]


class Heartbeat:
    """One worker's record and tallies; :meth:`step` is a :class:`~redflow.engine.loops.Loop` step."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        queues: list[str],
        slots: int,
        status: Callable[[], WorkerStatus],
        *,
        known: Callable[[str], bool],
        beat_s: float = DEFAULT_BEAT_S,
        version: str = "",
    ) -> None:
        self.store = store
        self.id = worker_id
        self.queues = queues
        self.slots = slots
        self.beat_s = beat_s
        self.version = version
        self._status = status
        self._known = known
        self._ttl_ms = int(max(RECORD_TTL_S, 10 * beat_s) * 1000)
        # Set by the first beat, not here: reading Redis's clock on a connection not yet
        # opened would put the connect in the round trip and skew the clock's estimate.
        self._started_at = 0.0
        self._host, self._pid = socket.gethostname(), os.getpid()
        self._counts: dict[tuple[str, int, str], int] = {}  # (kind, bin, workflow) -> attempts, since the last flush
        self._unsent: Counter[str] = Counter()  # fields of a flush that did not get through
        self._depth: dict[tuple[str, int, str], int] = {}  # (window, bucket start, queue) -> highest sample
        self._depth_sent: dict[tuple[str, int, str], int] = {}  # what the buckets hold of them
        self._samples = Rotation(queues, DEPTH_SAMPLES)  # the queues whose depth a beat samples, in turn
        self.beats = 0
        self.loop: Loop | None = None

    # -- counting, on the hot path ------------------------------------------
    def count(self, attempt: Attempt, outcome: Outcome) -> None:
        """Tally one ended attempt: its duration, and for a first attempt its wait since enqueue."""
        if outcome.kind not in _TIMED or not attempt.started_at:
            return
        name = attempt.info.workflow
        workflow = name if self._known(name) else UNKNOWN_WORKFLOW
        duration_ms = (time.time() - attempt.started_at) * 1000.0
        counts = self._counts
        key = (tally.DURATION, tally.bin_of(duration_ms), workflow)
        counts[key] = counts.get(key, 0) + 1
        if attempt.info.attempt == 1 and attempt.created_at_ms:
            waited_ms = self.store.now_ms() - duration_ms - attempt.created_at_ms
            key = (tally.START, tally.bin_of(max(0.0, waited_ms)), workflow)
            counts[key] = counts.get(key, 0) + 1

    # -- the loop -------------------------------------------------------------
    def record(self, now_ms: int) -> WorkerRecord:
        status = self._status()
        self._started_at = self._started_at or now_ms / 1000.0
        return WorkerRecord(
            id=self.id,
            host=self._host,
            pid=self._pid,
            version=self.version,
            queues=tuple(self.queues),
            slots=self.slots,
            busy=status.busy,
            done=status.done,
            failed=status.failed,
            started_at=self._started_at,
            seen_at=now_ms / 1000.0,
            beat_s=self.beat_s,
            stopping=status.stopping,
            running=status.running[:RUNNING_NAMED],
        )

    def step(self) -> float:
        """Write the record, sample the queues, flush the tallies: one round trip."""
        keys = self.store.keys
        now_ms = self.store.now_ms()
        pipe = self.store.pipeline()
        pipe.set(keys.worker(self.id), self.record(now_ms).to_json(), px=self._ttl_ms)
        pipe.zadd(keys.workers(), {self.id: now_ms})
        pipe.zremrangebyscore(keys.workers(), "-inf", now_ms - self._ttl_ms)
        sampled = self._samples.next()
        for queue in sampled:
            pipe.llen(keys.queue_ready(queue))
        counts = self._take_counts()
        changed = {key: n for key, n in self._depth.items() if self._depth_sent.get(key) != n}
        try:
            write_tallies(pipe, keys, now_ms, counts, changed)
            replies = pipe.execute()
        except RedisError:
            self._unsent.update(counts)  # sent again at the next beat that gets through
            raise
        self._depth_sent.update(changed)
        self._sample_depth(now_ms, sampled, replies[3 : 3 + len(sampled)])
        self.beats += 1
        return self.beat_s

    def _take_counts(self) -> Counter[str]:
        """What to flush, by bucket field; the counting starts afresh."""
        raw, self._counts = self._counts, {}
        fields, self._unsent = self._unsent, Counter()
        for (kind, index, workflow), n in raw.items():
            fields[tally.histogram_field(kind, index, workflow)] += n
        return fields

    def _sample_depth(self, now_ms: int, queues: list[str], lengths: list[Any]) -> None:
        """Keep the highest ready length of each queue per bucket (written at the next beat)."""
        for name, resolution in tally.RESOLUTIONS.items():
            start = resolution.start_of(now_ms)
            for queue, length in zip(queues, lengths):
                key = (name, start, queue)
                self._depth[key] = max(self._depth.get(key, 0), int(length))
        current = {k: v for k, v in self._depth.items() if k[1] >= tally.RESOLUTIONS[k[0]].start_of(now_ms)}
        # a bucket past is written one last time (its last sample) before it is dropped
        self._depth = current | {k: v for k, v in self._depth.items() if self._depth_sent.get(k) != v}
        self._depth_sent = {k: v for k, v in self._depth_sent.items() if k in self._depth}

    def goodbye(self) -> None:
        """Flush what is left and delete the record (a graceful stop)."""
        keys = self.store.keys
        pipe = self.store.pipeline()
        write_tallies(pipe, keys, self.store.now_ms(), self._take_counts(), {})
        pipe.delete(keys.worker(self.id))
        pipe.zrem(keys.workers(), self.id)
        try:
            pipe.execute()
        except RedisError as exc:  # the record expires by itself; until then it shows as lost
            log.info("could not remove this worker's record (%s)", exc)


def write_tallies(pipe: Any, keys: Keys, now_ms: int, counts: Counter[str], depth: dict[tuple[str, int, str], int]) -> None:
    """Add ``counts`` to the current bucket of every chart window and set the
    sampled depths, queued on ``pipe``; each bucket key gets its expiry."""
    touched: set[tuple[str, int]] = set()
    for name, resolution in tally.RESOLUTIONS.items():
        if not counts:
            continue
        key = keys.stats_bucket(resolution.span_s, resolution.start_of(now_ms))
        for field, n in counts.items():
            pipe.hincrby(key, field, n)
        touched.add((name, resolution.start_of(now_ms)))
    for (name, start, queue), length in depth.items():
        resolution = tally.RESOLUTIONS[name]
        pipe.hset(keys.stats_bucket(resolution.span_s, start), tally.depth_field(queue), length)
        touched.add((name, start))
    for name, start in touched:
        resolution = tally.RESOLUTIONS[name]
        pipe.pexpireat(keys.stats_bucket(resolution.span_s, start), start + resolution.span_ms + resolution.keep_s * 1000)
