"""The promoter: due scheduled runs (delays, retries, parked runs' timeouts) -> queued, pushed to ready.

Each due run moves in one atomic script (``promote_run``), so a crash
mid-batch loses nothing. What a pass costs Redis does not grow with the
worker's queues: the promoter keeps the due time of each queue's earliest
scheduled run (its *head*) and reads the heads again only when something
changed. Every client, worker and script that schedules or promotes a run
moves it in or out of the ``scheduled`` status index (DATA_MODEL.md), so
the index's size and newest entry, read in one round trip of two commands,
say whether the heads may have changed; they are read again then (one
command per queue, pipelined), when a known head is due, and every
FULL_READ_S regardless. On a cluster the status index is per queue: the
heads are read every pass there. The loop sleeps until the earliest head is
due (at most PROMOTER_IDLE_S); a local retry wakes it early.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from redflow.store.port import Store

if TYPE_CHECKING:
    from redflow.engine.loops import Loop

PROMOTE_BATCH = 100
PROMOTER_IDLE_S = 0.5
#: The heads are read again at least this often, whatever the index says (a safety net for clock skew).
FULL_READ_S = 30.0


class Promoter:
    """One :class:`~redflow.engine.loops.Loop` step per pass; see the module docstring."""

    def __init__(self, store: Store, queues: list[str]) -> None:
        self.store = store
        self.queues = queues
        self.heads: dict[str, float] = {}  # queue -> due ms of its earliest scheduled run (absent: none)
        self.next_wake_ms = 0
        self.loop: Loop | None = None
        self._signature: Any = None
        self._read_at = float("-inf")

    def wake_for(self, due_ms: int) -> None:
        if self.loop is not None and (self.next_wake_ms == 0 or due_ms < self.next_wake_ms):
            self.loop.wake()

    def step(self) -> float:
        store = self.store
        now_ms = store.now_ms()
        if self._changed():
            self._read_heads(self.queues)
        due = [queue for queue, at in self.heads.items() if at <= now_ms]
        full_batch = self._promote(due, now_ms) if due else False
        if due:
            self._read_heads(due)
        if full_batch:
            return 0.0
        next_due = min(self.heads.values(), default=None)
        if next_due is None:
            sleep_s = PROMOTER_IDLE_S
        else:
            sleep_s = min(PROMOTER_IDLE_S, max(0.01, (next_due - store.now_ms()) / 1000.0))
        self.next_wake_ms = now_ms + int(sleep_s * 1000)
        return sleep_s

    def _changed(self) -> bool:
        """Whether the heads must be read again: the scheduled index changed (or cannot say)."""
        keys = self.store.keys
        if keys.cluster:
            return True
        pipe = self.store.pipeline()
        index = keys.runs_status("scheduled")
        pipe.zcard(index)
        pipe.zrange(index, -1, -1, withscores=True)
        signature = tuple(map(repr, pipe.execute()))
        changed, self._signature = bool(signature != self._signature), signature
        return changed or time.monotonic() - self._read_at >= FULL_READ_S

    def _read_heads(self, queues: list[str]) -> None:
        keys = self.store.keys
        if queues is self.queues:
            self._read_at = time.monotonic()
        pipe = self.store.pipeline()
        for queue in queues:
            pipe.zrange(keys.queue_scheduled(queue), 0, 0, withscores=True)
        for queue, head in zip(queues, pipe.execute()):
            if head:
                self.heads[queue] = head[0][1]
            else:
                self.heads.pop(queue, None)

    def _promote(self, queues: list[str], now_ms: int) -> bool:
        """Promote the due runs of ``queues`` (a batch each); returns whether a batch was full."""
        store, keys = self.store, self.store.keys
        pipe = store.pipeline()
        for queue in queues:
            pipe.zrangebyscore(keys.queue_scheduled(queue), "-inf", now_ms, start=0, num=PROMOTE_BATCH)
        promote = store.batch()
        full_batch = False
        for queue, due in zip(queues, pipe.execute()):
            full_batch = full_batch or len(due) >= PROMOTE_BATCH
            for run_id in due:
                store.scripts.promote_run(run_id=run_id, queue=queue, now_ms=now_ms, conn=promote)
        if len(promote):
            promote.execute()
        return full_batch
