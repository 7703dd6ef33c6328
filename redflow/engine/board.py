"""The board of a worker: its idle slots, and what its claimers know of its queues.

Slots with no run in hand wait here without talking to Redis; the claimers
(engine/claimer.py, one blocking wait per queue) hand them runs or mark the
queues that hold runs:

- An idle worker: a claimer reserves an idle slot and hands it the run its
  BLMOVE moved into processing.
- A marked queue (runs waiting, found by a watching claimer or by a claim
  answered at once) is given to idle slots, which take its runs
  (``take_run``), no more at once than the runs its last take left in
  ready: a backlog gets every idle slot in one round trip, a single run one.
  While a queue is marked, claimers reserve no slot and watch instead.
- A marked queue no slot went to yet (*unserved*) is taken by the next busy
  slot to settle (beside its settle: engine/slot.py).
- A busy worker of several queues keeps one slot polling the queues no
  claimer marked (one take each, sent with the slots' commands): a quiet
  queue's run starts in the same round trip as a busy slot's next run, as
  fast as a notice could bring it (a claimer's notice comes a round trip later).
- Such a worker also keeps a limit on any one queue's runs in flight
  (engine/queue_limit.py, moved by the hub's lag): a queue at its limit gets
  no idle slot and its settles claim nothing next; claimers reserve the idle
  slots it leaves, as on an idle worker.

Every method runs in the gevent hub's thread; none blocks but
:meth:`Board.wait_work` and :meth:`Board.wait_drained`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gevent.event import AsyncResult, Event

from redflow.engine.queue_limit import QueueLimit

#: A worker of several queues with at least this many slots keeps one polling while busy.
POLLER_FROM_SLOTS = 8


@dataclass(frozen=True, slots=True)
class Work:
    """What a slot gets from the board."""

    queue: str
    run_id: str | None  # moved into processing by a claimer: start it; None: take the queue's next run
    waited_s: float = 0.0  # how long the claimer's BLMOVE waited for it
    taken: Any = None  # a run already taken and started (a claim.Claimed): run it
    poll: tuple[str, ...] = ()  # take from each of these queues (the busy worker's poller)


class Board:
    """Idle slots, the claimers' reservations of them, and the queues known to hold runs."""

    def __init__(self, queues: Sequence[str], slots: int = 0) -> None:
        self.queues = tuple(queues)
        self.poller = len(queues) > 1 and slots >= POLLER_FROM_SLOTS
        #: The limit on one queue's runs in flight (a worker of one queue, or of few slots: none).
        self.limit: QueueLimit | None = QueueLimit(slots, self._busiest) if self.poller else None
        if self.limit is not None:
            self.limit.on_raise = self._give
        self._in_flight = dict.fromkeys(self.queues, 0)  # queue -> its runs the slots run now (with a limit only)
        self._polling = False
        self._idle: deque[AsyncResult] = deque()  # slots waiting for work, first come first served
        self._reserved = 0
        self._marked: list[str] = []  # queues found holding runs, oldest first
        self._unserved: list[str] = []  # marked queues no slot was sent to since, oldest first
        self._taking: dict[str, int] = {}  # marked queue -> takes of it on their way
        self._left: dict[str, int] = {}  # marked queue -> the entries its last take left in ready
        self._started: deque[Any] = deque()  # runs a poll took beyond the first, for the next slots
        self._turn = 0
        self._drained = {queue: Event() for queue in queues}
        self.revoke: Callable[[], object] = lambda: None  # unblock the claiming claimers (set by Claimers)
        self.closed = False

    # -- the slots' side ---------------------------------------------------------
    def wait_work(self) -> Work | None:
        """An idle slot's next work: at once when there is some, else what a claimer hands it
        (None once the board is closed). An idle slot waits here until then: a claimer may have
        reserved it, so it never leaves on its own."""
        work = self._work_now()
        if work is not None or self.closed:
            return work
        waiting: AsyncResult = AsyncResult()
        self._idle.append(waiting)
        handed: Work | None = waiting.get()
        return handed

    def begun(self, queue: str) -> None:
        """A slot runs ``queue``'s runs now (counted against the queue's limit)."""
        if self.limit is not None:
            self._in_flight[queue] += 1

    def ended(self, queue: str) -> None:
        """A slot ran its last run of ``queue`` for now: a queue below its limit again gets idle slots."""
        if self.limit is not None:
            self._in_flight[queue] -= 1
            if self.unreserved > 0 and queue in self._marked and not self.at_limit(queue):
                self._give()

    def over_limit(self, queue: str) -> bool:
        """For a slot about to settle a run of ``queue``: the queue holds more runs in flight than
        its limit (the settle claims no next run)."""
        return self.limit is not None and self._in_flight.get(queue, 0) > self.limit.limit

    def at_limit(self, queue: str) -> bool:
        """``queue``'s runs in flight and takes on their way fill its limit: no more slots for it."""
        return self.limit is not None and self._in_flight.get(queue, 0) + self._taking.get(queue, 0) >= self.limit.limit

    def taken(self, queue: str, left: int) -> None:
        """A slot's take of ``queue`` (a :class:`Work` without a run id) came back: it left
        ``left`` entries in ready (-1: it found none, the queue is drained)."""
        self._taking[queue] = max(0, self._taking.get(queue, 0) - 1)
        if left <= 0:  # empty now: unmarked, so that its claimer watches it again
            self.drained(queue)
            return
        self._left[queue] = left
        while queue in self._marked and self.unreserved > 0 and self._taking[queue] < left and not self.at_limit(queue):
            self._idle.popleft().set(self._take(queue))

    def polled(self) -> None:
        """The poller's takes came back (or one found a run: the next slot to settle polls next);
        the runs they took beyond the poller's own come through :meth:`hand_started`."""
        self._polling = False

    def polled_queue(self, queue: str, left: int) -> None:
        """A poll's take of ``queue`` left ``left`` runs in ready (-1: found none): a marked
        queue it emptied is unmarked (its claimer waits on Redis again)."""
        if left <= 0 and queue in self._marked:
            self.drained(queue)

    def hand_started(self, started: Sequence[Any]) -> None:
        """Runs a poll took beyond the one its slot runs: for the next slots to settle."""
        self._started.extend(started)

    def drained(self, queue: str) -> None:
        """``queue`` was found empty: unmarked, and its claimer waits on Redis again."""
        if queue in self._marked:
            self._marked.remove(queue)
        if queue in self._unserved:
            self._unserved.remove(queue)
        self._left.pop(queue, None)
        self._drained[queue].set()

    def is_marked(self, queue: str) -> bool:
        return queue in self._marked

    def others_marked(self, queue: str) -> bool:
        """Whether another queue holds runs (a slot's long streak of ``queue`` ends then)."""
        return any(marked != queue for marked in self._marked)

    def take_unserved(self, queue: str) -> Work | None:
        """For a slot about to settle a run of ``queue``: a run a poll started, or the oldest
        other queue that holds runs no slot went to yet (the caller takes from it and tells
        :meth:`taken`); None when there is neither."""
        if self._started:
            return Work(queue, None, taken=self._started.popleft())
        return self._take_unserved(besides=queue) or self._poll()  # (a poll: the poller found a run and runs it)

    # -- the claimers' side ------------------------------------------------------
    @property
    def unreserved(self) -> int:
        return len(self._idle) - self._reserved

    @property
    def busy(self) -> bool:
        """Some queue holds runs for the idle slots (or the board closed): claimers watch, reserving
        none. A marked queue at its limit takes no idle slot: the claimers may reserve them."""
        return any(not self.at_limit(queue) for queue in self._marked) or self.closed

    def try_reserve(self) -> bool:
        """A claimer's reservation of an idle slot for the run its claim waits for (none while
        idle slots have a marked queue to take from)."""
        return not self.busy and self.reserve()

    def reserve(self) -> bool:
        """An idle slot no claimer reserved, for a run a claimer is about to hand."""
        if self.unreserved <= 0 or self.closed:
            return False
        self._reserved += 1
        return True

    def unreserve(self) -> None:
        self._reserved -= 1
        self._give()

    def hand(self, work: Work) -> bool:
        """A reserving claimer's run goes to an idle slot (the reservation is used up);
        False when the board closed meanwhile (the run waits in processing for the reaper)."""
        self._reserved -= 1
        if not self._idle:
            return False
        self._idle.popleft().set(work)
        return True

    def mark(self, queue: str) -> None:
        """A claimer saw runs in ``queue``: an idle slot takes from it, or the next one to settle."""
        if queue not in self._marked:
            self._marked.append(queue)
        if queue not in self._unserved:
            self._unserved.append(queue)
        self._drained[queue].clear()
        self._give()
        if self._reserved and not self.at_limit(queue):
            self.revoke()  # slots reserved by claimers of other queues: freed for the runs (the claimers watch)

    def wait_drained(self, queue: str, timeout_s: float) -> bool:
        return bool(self._drained[queue].wait(timeout_s))

    def close(self) -> None:
        """Stop: idle slots get None, and no more reservations are made."""
        self.closed = True
        while self._idle:
            self._idle.popleft().set(None)

    # -- inside ------------------------------------------------------------------
    def _work_now(self) -> Work | None:
        """Work to be had without waiting: a run a poll started, an unserved queue, the
        busy worker's poll, a marked queue's turn; None when there is none."""
        if self.closed:
            return None
        if self._started:
            return Work("", None, taken=self._started.popleft())
        work = self._take_unserved() or self._poll()
        if work is not None:
            return work
        queue = self._next_marked()
        return self._take(queue) if queue is not None else None

    def _take_unserved(self, besides: str = "") -> Work | None:
        """A take of the oldest marked queue no slot went to yet (but ``besides``) that is below
        its limit, now served; None when there is none."""
        for queue in self._unserved:
            if queue != besides and not self.at_limit(queue):
                self._unserved.remove(queue)
                return self._take(queue)
        return None

    def _poll(self) -> Work | None:
        """The busy worker's poll, when no slot polls: one take from each queue no slot serves."""
        if not self.poller or not self._marked or self._polling or self._reserved:
            return None  # (slots reserved: claimers wait on the quiet queues with a slot in hand)
        served = set(self._marked) - set(self._unserved)  # (an unserved queue is polled too: no slot takes it yet)
        quiet = tuple(queue for queue in self.queues if queue not in served and not self.at_limit(queue))
        if not quiet:
            return None
        self._polling = True
        return Work("", None, poll=quiet)

    def _busiest(self) -> int:
        return max(self._in_flight.values(), default=0)

    def _give(self) -> None:
        """Idle slots no claimer reserved get the work to be had."""
        while self.unreserved > 0:
            work = self._work_now()
            if work is None:
                return
            self._idle.popleft().set(work)

    def _take(self, queue: str) -> Work:
        self._taking[queue] = self._taking.get(queue, 0) + 1
        return Work(queue, None)

    def _next_marked(self) -> str | None:
        """The next marked queue in turn that has runs for one more take (None: the marked
        queues have takes enough on their way)."""
        count = len(self._marked)
        for _ in range(count):
            self._turn = (self._turn + 1) % count
            queue = self._marked[self._turn]
            if self._taking.get(queue, 0) < max(1, self._left.get(queue, 1)) and not self.at_limit(queue):
                return queue
        return None
