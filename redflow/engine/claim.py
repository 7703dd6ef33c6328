"""How a worker's slots claim runs.

A slot with no run in hand waits on the worker's board (engine/claimer.py)
without talking to Redis; it gets either a run a queue's claimer moved into
processing with BLMOVE (the attempt starts it), or a queue known to hold
runs, whose next run it takes and starts in one call (``take_run``). A
claimer's BLMOVE may move a queue's priority marker instead of a run: then
the best prioritized run is taken. A busy slot claims its next run in its
settle instead (the ``next_token`` of a settle request) and does not come here.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from redflow.core.flow import PRIORITY_MARKER
from redflow.core.keys import new_id
from redflow.engine.board import Work
from redflow.engine.observers import Observers
from redflow.store.port import Store
from redflow.store.replies import StartReply
from redflow.store.requests import StartRequest
from redflow.store.scripts import Conn

log = logging.getLogger("redflow.claim")

#: What a reply byte that is not UTF-8 decodes to: no run id holds it.
NOT_AN_ID = "\ufffd"


class ClaimOptions(Protocol):
    """The worker's options a claim reads (``WorkerOptions``)."""

    @property
    def lease_ms(self) -> int: ...


@dataclass(slots=True)
class Claimed:
    """A run a slot claimed: ``start`` is its start reply when the claim started
    it in the same call (``take_run``, or a settle's next run), None when the
    attempt starts it (after BLMOVE, or an inline child). ``token`` is the
    lease token it was (or will be) started under, ``lease_sent_ms`` when that
    request was sent (monotonic): the lease cannot lapse before it + lease_ms."""

    queue: str
    run_id: str
    token: str
    start: StartReply | None = None
    lease_sent_ms: float = 0.0
    claimed_at: float = 0.0
    left: int = 0  # a take's: the entries it left in ready


class SlotClaimer:
    """Claims runs for the slots of one worker (see the module docstring)."""

    def __init__(self, store: Store, options: ClaimOptions, *, limited: str, observers: Observers) -> None:
        self.store = store
        self.lease_ms = options.lease_ms
        self.limited = limited
        self.observers = observers

    def claimed(self, conn: Conn, work: Work) -> Claimed | None:
        """What a slot makes of the board's ``work``: a run a claimer moved into
        processing (started by the attempt), or the next run of a marked queue
        taken and started in one call (None: the queue is empty)."""
        if work.run_id is None:
            return self.take(conn, work.queue, 0.0)
        if work.run_id == PRIORITY_MARKER:  # stands for the queue's prioritized runs: take the best one
            return self.take(conn, work.queue, work.waited_s, marker_moved=True)
        if self.observers.active:
            self.observers.on_claim(work.queue, work.waited_s)
        return Claimed(work.queue, work.run_id, new_id("lease"), claimed_at=time.time())

    def started(self, conn: Conn, work: Work) -> Claimed | None:
        """As :meth:`claimed`, for a claimer on its own connection: a run its BLMOVE moved is
        started here too, so that the slot it goes to runs it at once (a start sent on a busy
        worker's shared connection waits behind every run in flight: engine/queue_limit.py)."""
        claimed = self.claimed(conn, work)
        if claimed is None or claimed.start is not None or NOT_AN_ID in claimed.run_id:
            return claimed  # taken and started already; or not a run id, which the attempt drops
        claimed.lease_sent_ms = time.monotonic() * 1000.0
        request = StartRequest(claimed.run_id, work.queue, claimed.token, self.lease_ms, self.store.now_ms(), self.limited)
        claimed.start = self.store.scripts.start_run(request, conn=conn)
        return claimed

    def take(self, conn: Conn, queue: str, waited_s: float, *, marker_moved: bool = False) -> Claimed | None:
        """Claim and start the next run of ``queue`` in one call (take_run), or None."""
        token, sent_ms = new_id("lease"), time.monotonic() * 1000.0
        taken = self.store.scripts.take_run(
            queue=queue,
            token=token,
            lease_ms=self.lease_ms,
            now_ms=self.store.now_ms(),
            limited=self.limited,
            marker_moved=marker_moved,
            conn=conn,
        )
        if taken is None:
            return None
        if self.observers.active:
            self.observers.on_claim(queue, waited_s)
        return Claimed(queue, taken.run_id, token, taken.start, sent_ms, time.time(), taken.left)


def drop_invalid_entries(store: Store, queue: str, *, conn: Conn = None, who: str = "") -> None:
    """Remove the entries of ``queue``'s processing list that cannot be run ids (bytes
    that are not UTF-8: not removable by name), with a warning saying how many."""
    removed = store.scripts.purge_invalid_entries(queue=queue, conn=conn)
    log.warning("%squeue %r: dropped %d processing entry(ies) that are not run ids: %r", who, queue, len(removed), removed[:5])
