"""Claimers: one blocking wait per queue, not one per slot (issue 34 phase B; not wired into worker.py yet).

Today every idle slot of a worker holds a blocking connection and, with
several queues, probes each of them every second: an idle ``-c 500`` worker
on 50 queues sends ~49,000 commands/s over ~517 connections. Here a worker
has one :class:`Claimer` per queue, each with its own connection, and its
idle slots wait on a :class:`Board` without talking to Redis at all:

- **claim**: while the worker has an idle slot no claimer has reserved, a
  claimer reserves one and waits in ``BLMOVE ready processing RIGHT LEFT``:
  the run moves into processing atomically (a queued run is always in ready
  or processing) and goes straight to the reserved slot, which starts it.
  Only one worker of a fleet wakes for a run.
- **watch**: with no idle slot to reserve (a busy worker), the claimer
  waits in ``BLMOVE ready ready RIGHT RIGHT``, which pops the tail and
  pushes it back where it was: a blocking "is there anything", moving
  nothing. When it returns, the queue is marked on the board and the
  claimer waits until a slot finds the queue empty; meanwhile a slot
  ending a run takes from the marked queues in turn (``take_run``), so a
  quiet queue's run is served at the next slot that comes free, without
  probing empty queues one round trip each.
- A run marked on a watched queue while every idle slot is reserved by a
  claimer of an empty queue: one such claimer is unblocked (``CLIENT
  UNBLOCK``, its BLMOVE returns nothing) and gives its slot up.

Idle, a worker sends one BLMOVE per queue per ``timeout_s`` (a stop aborts
the connections, so the timeout can be long) whatever its slot count, and
holds one connection per queue. Stand-alone Redis only: on a cluster
``CLIENT UNBLOCK`` must reach the queue's node.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gevent
from gevent.event import AsyncResult, Event
from redis.exceptions import RedisError

from redflow.core.keys import Keys
from redflow.store.slot_connection import SlotConnection

log = logging.getLogger("redflow.claimer")

CLAIM_TIMEOUT_S = 5.0
BACKOFF_S = 0.5


@dataclass(frozen=True, slots=True)
class Work:
    """What a slot gets from the board."""

    queue: str
    run_id: str | None  # moved into processing by a claimer: start it; None: take the queue's next run


class Board:
    """Idle slots, the claimers' reservations of them, and the queues known to hold runs.

    Every method runs in the gevent hub's thread; none blocks but :meth:`wait_work`
    and :meth:`wait_drained`."""

    def __init__(self, queues: Sequence[str]) -> None:
        self._idle: deque[AsyncResult] = deque()  # slots waiting for work, first come first served
        self._reserved = 0
        self._marked: list[str] = []  # queues a watching claimer saw runs in, oldest first
        self._turn = 0
        self._drained = {queue: Event() for queue in queues}
        self.revoke: Callable[[], bool] = lambda: False  # unblock one claiming claimer (set by Claimers)
        self.closed = False

    # -- the slots' side ---------------------------------------------------------
    def wait_work(self) -> Work | None:
        """An idle slot's next work: a marked queue's turn at once, else what a claimer hands it
        (None once the board is closed). An idle slot waits here until then: a claimer may have
        reserved it, so it never leaves on its own."""
        queue = self._next_marked()
        if queue is not None:
            return Work(queue, None)
        if self.closed:
            return None
        waiting: AsyncResult = AsyncResult()
        self._idle.append(waiting)
        work: Work | None = waiting.get()
        return work

    def drained(self, queue: str) -> None:
        """A slot's take found ``queue`` empty: its claimer waits on Redis again."""
        if queue in self._marked:
            self._marked.remove(queue)
        self._drained[queue].set()

    def others_marked(self, queue: str) -> bool:
        """Whether another queue waits for a slot (a slot's run of ``queue`` ends its streak then)."""
        return any(marked != queue for marked in self._marked)

    # -- the claimers' side ------------------------------------------------------
    @property
    def unreserved(self) -> int:
        return len(self._idle) - self._reserved

    def try_reserve(self) -> bool:
        if self.unreserved <= 0 or self.closed:
            return False
        self._reserved += 1
        return True

    def unreserve(self) -> None:
        self._reserved -= 1
        self._give_marked()

    def hand(self, work: Work) -> bool:
        """A reserving claimer's run goes to an idle slot (the reservation is used up);
        False when the board closed meanwhile (the run waits in processing for the reaper)."""
        self._reserved -= 1
        if not self._idle:
            return False
        self._idle.popleft().set(work)
        return True

    def mark(self, queue: str) -> None:
        """A watching claimer saw runs in ``queue``: an idle slot takes from it, or the next one that comes free."""
        if queue not in self._marked:
            self._marked.append(queue)
        self._drained[queue].clear()
        if not self._give_marked() and self._idle:
            self.revoke()  # every idle slot is reserved by a claimer of an empty queue: free one

    def wait_drained(self, queue: str, timeout_s: float) -> bool:
        return bool(self._drained[queue].wait(timeout_s))

    def close(self) -> None:
        """Stop: idle slots get None, and no more reservations are made."""
        self.closed = True
        while self._idle:
            self._idle.popleft().set(None)

    def _give_marked(self) -> bool:
        if self.unreserved <= 0 or not self._marked:
            return False
        queue = self._next_marked()
        if queue is None:
            return False
        self._idle.popleft().set(Work(queue, None))
        return True

    def _next_marked(self) -> str | None:
        if not self._marked:
            return None
        self._turn = (self._turn + 1) % len(self._marked)
        return self._marked[self._turn]


class Claimer:
    """One queue's blocking wait, on a connection of its own."""

    def __init__(self, board: Board, keys: Keys, queue: str, conn: SlotConnection, *, timeout_s: float = CLAIM_TIMEOUT_S) -> None:
        self.board, self.queue, self.conn, self.timeout_s = board, queue, conn, timeout_s
        self.ready, self.processing = keys.queue_ready(queue), keys.queue_processing(queue)
        self.client_id: int | None = None  # the connection's, while it waits in a claim (CLIENT UNBLOCK)
        self.claiming = False
        self._stopping = False
        self.greenlet: gevent.Greenlet | None = None

    def start(self) -> Claimer:
        self.greenlet = gevent.spawn(self._run)
        self.greenlet.name = f"redflow-claimer-{self.queue}"
        return self

    def stop(self) -> None:
        """End the wait now (a blocked BLMOVE returns nothing); a run it already moved is still handed."""
        self._stopping = True
        self.conn.stop_blocking()
        self.board.drained(self.queue)  # a claimer waiting for its queue to drain leaves too

    def _run(self) -> None:
        while not self._stopping:
            try:
                if self.board.try_reserve():
                    self._claim()
                else:
                    self._watch()
            except RedisError as exc:
                self.client_id = None  # a new connection: a new id
                log.warning("claimer of %r: Redis error (%s); retrying in %.1fs", self.queue, exc, BACKOFF_S)
                gevent.sleep(BACKOFF_S)

    def _claim(self) -> None:
        """Wait for a run with a slot reserved for it."""
        try:
            if self.client_id is None:
                self.client_id = int(self.conn.execute("CLIENT", "ID"))
            self.claiming = True
            run_id = self.conn.execute("BLMOVE", self.ready, self.processing, "RIGHT", "LEFT", self.timeout_s, block_s=self.timeout_s)
        except BaseException:
            self.board.unreserve()
            raise
        finally:
            self.claiming = False
        if run_id:
            if not self.board.hand(Work(self.queue, str(run_id))):
                log.warning("claimer of %r: run %s claimed as the worker stopped; the reaper returns it to ready", self.queue, run_id)
        else:
            self.board.unreserve()

    def _watch(self) -> None:
        """No slot to reserve: wait until the queue holds a run, without moving it."""
        if self.conn.execute("BLMOVE", self.ready, self.ready, "RIGHT", "RIGHT", self.timeout_s, block_s=self.timeout_s) is None:
            return
        self.board.mark(self.queue)
        self.board.wait_drained(self.queue, self.timeout_s)


class Claimers:
    """A worker's claimers, one per queue; ``unblock`` sends CLIENT UNBLOCK on another connection."""

    def __init__(self, board: Board, keys: Keys, queues: Sequence[str], connect: Callable[[], SlotConnection],
                 unblock: Callable[[int], object], *, timeout_s: float = CLAIM_TIMEOUT_S) -> None:  # fmt: skip
        self.board = board
        self.claimers = [Claimer(board, keys, queue, connect(), timeout_s=timeout_s) for queue in queues]
        self._unblock = unblock
        board.revoke = self.revoke_one

    def start(self) -> Claimers:
        for claimer in self.claimers:
            claimer.start()
        return self

    def revoke_one(self) -> bool:
        """Unblock one claimer waiting in a claim, so that it gives its reserved slot up."""
        for claimer in self.claimers:
            if claimer.claiming and claimer.client_id is not None:
                gevent.spawn(self._unblock, claimer.client_id)
                return True
        return False

    def stop(self) -> None:
        """Claimers first (a run one of them moved meanwhile still reaches a slot), then the board."""
        for claimer in self.claimers:
            claimer.stop()
        gevent.joinall([c.greenlet for c in self.claimers if c.greenlet is not None], timeout=2)
        self.board.close()
        for claimer in self.claimers:
            claimer.conn.close()
