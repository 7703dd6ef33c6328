"""One consumer slot of a worker: claim, lease, run, settle, over and over.

A busy slot's settle also claims and starts its next run of the same queue
(one round trip per run). It leaves its queue when another queue of the
worker holds runs no slot serves yet (the board's unserved queues: its
settle then claims nothing, and the take of the other queue's next run is
sent beside it, so the switch costs no extra round trip), or, after
MAX_QUEUE_STREAK runs in a row, when another queue holds runs at all. With
no run in hand it waits on the board (engine/claimer.py), without a
connection of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent
from gevent.event import Event
from redis.exceptions import RedisError

from redflow.engine.attempt import Attempt, Runtime
from redflow.engine.board import Board, Work
from redflow.engine.claim import Claimed, SlotClaimer
from redflow.engine.loops import BACKOFF_MAX_S
from redflow.store.mux_connection import Connection

log = logging.getLogger("redflow.worker")

SLOT_BACKOFF_MIN_S = 0.05
#: A slot of a worker with several queues takes at most this many runs in a row
#: from one queue through its settles while another queue holds runs.
MAX_QUEUE_STREAK = 16


class Slot:
    """One greenlet's loop; ``run_attempt`` runs an attempt and returns the next one its settle claimed."""

    def __init__(
        self,
        index: int,
        conn: Connection,
        *,
        board: Board,
        claimer: SlotClaimer,
        runtime: Runtime,
        run_attempt: Callable[[Attempt], Attempt | None],
        stopping: Event,
    ) -> None:
        self.index, self.conn, self.board, self.claimer, self.runtime = index, conn, board, claimer, runtime
        self._run_attempt = run_attempt
        self._stopping = stopping
        self._streak = 0  # runs in a row from one queue
        self._queues = list(board.queues)
        self._cursor = index % max(1, len(self._queues))  # where its probe of the queues starts
        self._probing = False  # its streak ended: it probes the queues before it waits on the board
        self._switch: gevent.Greenlet | None = None  # the take of another queue, sent beside a settle
        self._serving: str | None = None  # the queue of the run in hand (counted on the board)

    def run(self) -> None:
        backoff = SLOT_BACKOFF_MIN_S
        attempt: Attempt | None = None
        while True:
            try:
                if attempt is None:
                    attempt = self._next()
                    if attempt is None:
                        if self._stopping.is_set() or self.board.closed:
                            return
                        continue
                self._streak += 1
                queue = attempt.queue
                attempt.decide_next = lambda q=queue: self._decide_next(q)
                self._serve(queue)
                ended, attempt = attempt, self._run_attempt(attempt)
                if attempt is None:
                    self._serve(None)
                if ended.found_empty:
                    self.board.drained(queue)
                backoff = SLOT_BACKOFF_MIN_S
            except RedisError as exc:
                attempt = None  # a next run claimed by a lost reply is recovered by the reaper
                self._serve(None)
                log.warning("slot %d: Redis error (%s); retrying in %.2fs", self.index, exc, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            except Exception:  # defensive: one bad run must never stop the slot
                attempt = None
                self._serve(None)
                log.exception("slot %d: unexpected error", self.index)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _serve(self, queue: str | None) -> None:
        """The queue whose runs this slot runs now (None: none), counted on the board against
        its limit while the slot goes from one of its runs to the next."""
        if queue != self._serving:
            if self._serving is not None:
                self.board.ended(self._serving)
            if queue is not None:
                self.board.begun(queue)
            self._serving = queue

    def _next(self) -> Attempt | None:
        """The run of a take sent beside the last settle, else work from the board (None: nothing
        came of it, or the worker stops)."""
        if self._switch is not None:
            switch, self._switch = self._switch, None
            claimed: Claimed | None = switch.get()  # (its error, if any, is the slot's)
        elif self._probing and (claimed := self._probe()) is not None:
            pass
        else:
            if self._stopping.is_set():
                return None
            work = self.board.wait_work()
            if work is None:
                return None
            claimed = self._claim(work)
        if claimed is None:
            return None
        self._streak = 0
        return Attempt(self.runtime, self.conn, claimed)

    def _claim(self, work: Work) -> Claimed | None:
        """What the board's ``work`` gives this slot: a run taken already, the busy worker's poll
        (whose run, if any, the poll runs itself: None), a marked queue's take, or a claimer's run."""
        if work.taken is not None:
            return work.taken  # type: ignore[no-any-return]
        if work.poll:
            self._poll(work.poll)
            return None
        return self._take(work) if work.run_id is None else self.claimer.claimed(self.conn, work)

    def _take(self, work: Work) -> Claimed | None:
        """A take of a marked queue; the board hears how it went."""
        claimed = None
        try:
            claimed = self.claimer.claimed(self.conn, work)
        finally:
            self.board.taken(work.queue, left=-1 if claimed is None else claimed.left)
        return claimed

    def _poll(self, queues: tuple[str, ...]) -> None:
        """The busy worker's poll: one take from each quiet queue, sent together with the
        slots' commands. The first run found is this slot's, run at once by the greenlet its
        reply woke (not after the other takes); others go to the next slots to settle."""
        mine: list[Claimed] = []

        def take(queue: str) -> Claimed | None:
            claimed = self.claimer.take(self.conn, queue, 0.0)
            self.board.polled_queue(queue, -1 if claimed is None else claimed.left)
            if claimed is None or mine:
                return claimed
            mine.append(claimed)
            self.board.polled()  # the next slot to settle polls meanwhile
            attempt = Attempt(self.runtime, self.conn, claimed)
            self._run_attempt(attempt)  # claims nothing next (claim_next is False)
            return None

        takes = [gevent.spawn(take, queue) for queue in queues]
        gevent.joinall(takes)
        if not mine:
            self.board.polled()
        self.board.hand_started([g.value for g in takes if g.successful() and g.value is not None])
        for g in takes:
            if not g.successful() and isinstance(g.exception, RedisError):
                raise g.exception

    def _decide_next(self, queue: str) -> bool:
        """At the settle: whether it claims the queue's next run. A queue no slot serves yet
        gets this slot (its take leaves now, beside the settle); a long streak yields to any other
        queue the board knows to hold runs (none marked: it goes on, probing no queue for nothing)."""
        board = self.board
        if board.over_limit(queue):  # its runs in flight went past its limit (engine/queue_limit.py)
            return False
        other = board.take_unserved(queue)
        if other is not None:  # taken beside the settle, whose reply comes in the same read
            self._switch = gevent.spawn(self._claim, other)
            return False
        if self._streak >= MAX_QUEUE_STREAK and board.others_marked(queue):
            self._probing = True  # a long streak ends: the other queues get their turn
            return False
        return True

    def _probe(self) -> Claimed | None:
        """After a long streak: a take from each queue in turn from the slot's cursor, until one
        has a run (what keeps a quiet queue's run from waiting behind a busy queue's)."""
        self._probing = False
        count = len(self._queues)
        for offset in range(count):
            if self._stopping.is_set():
                return None
            queue = self._queues[(self._cursor + offset) % count]
            if self.board.at_limit(queue):
                continue
            claimed = self.claimer.take(self.conn, queue, 0.0)
            if claimed is not None:
                self._cursor = (self._cursor + offset + 1) % count
                return claimed
        return None
