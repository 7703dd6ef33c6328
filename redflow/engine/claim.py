"""How a worker's slots claim runs.

A slot with no run in hand claims one: a worker of several queues first
tries each (``take_run``: claim and start in one call, round-robin from the
slot's cursor), so busy queues don't wait behind empty ones; then it blocks
on one rotating queue with BLMOVE (ready -> processing). The BLMOVE may
take a queue's priority marker instead of a run: then the best prioritized
run is taken. A busy slot claims its next run in its settle instead (the
``next_token`` of a settle request) and does not come here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gevent.event import Event

from redflow.core.flow import PRIORITY_MARKER
from redflow.core.keys import new_id
from redflow.engine.observers import Observers
from redflow.store.port import Store
from redflow.store.replies import StartReply
from redflow.store.scripts import Conn

log = logging.getLogger("redflow.claim")

#: What a reply byte that is not UTF-8 decodes to: no run id holds it.
NOT_AN_ID = "\ufffd"


class ClaimOptions(Protocol):
    """The worker's options a claim reads (``WorkerOptions``)."""

    @property
    def lease_ms(self) -> int: ...
    @property
    def blmove_timeout_s(self) -> float: ...


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


class SlotClaimer:
    """Claims runs of ``queues`` for the slots of one worker (see the module docstring)."""

    def __init__(
        self, store: Store, queues: Sequence[str], options: ClaimOptions, *, limited: str, observers: Observers, stopping: Event
    ) -> None:
        self.store = store
        self.queues = list(queues)
        self.lease_ms = options.lease_ms
        self.block_s = options.blmove_timeout_s
        self.limited = limited
        self.observers = observers
        self._stopping = stopping
        self._cursors: list[int] = []

    def add_slot(self) -> int:
        """A new slot's index (its round-robin cursor starts at its own queue)."""
        self._cursors.append(len(self._cursors) % max(1, len(self.queues)))
        return len(self._cursors) - 1

    def claim(self, index: int, conn: Conn, blocking: Any) -> Claimed | None:
        """A run of one of the queues for slot ``index``, or ``None`` after the blocking timeout."""
        queues = self.queues
        if not queues:
            self._stopping.wait(self.block_s)
            return None
        count = len(queues)
        start = self._cursors[index]
        if count > 1:
            for offset in range(count):
                claimed = self.take(conn, queues[(start + offset) % count], 0.0)
                if claimed is not None:
                    self._cursors[index] = (start + offset + 1) % count
                    return claimed
                if self._stopping.is_set():
                    return None
        queue = queues[start % count]
        self._cursors[index] = (start + 1) % count
        return self._block(conn, blocking, queue)

    def _block(self, conn: Conn, blocking: Any, queue: str) -> Claimed | None:
        """BLMOVE one entry of ``queue`` (ready -> processing) on the slot's own connection."""
        keys = self.store.keys
        began = time.monotonic()
        run_id = blocking.execute(
            "BLMOVE", keys.queue_ready(queue), keys.queue_processing(queue), "RIGHT", "LEFT", self.block_s, block_s=self.block_s
        )
        if not run_id:
            return None
        if run_id == PRIORITY_MARKER:  # stands for the queue's prioritized runs: take the best one
            return self.take(conn, queue, time.monotonic() - began, marker_moved=True)
        if self.observers.active:
            self.observers.on_claim(queue, time.monotonic() - began)
        return Claimed(queue, run_id, new_id("lease"), claimed_at=time.time())

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
        return Claimed(queue, taken.run_id, token, taken.start, sent_ms, time.time())


def drop_invalid_entries(store: Store, queue: str, *, conn: Conn = None, who: str = "") -> None:
    """Remove the entries of ``queue``'s processing list that cannot be run ids (bytes
    that are not UTF-8: not removable by name), with a warning saying how many."""
    removed = store.scripts.purge_invalid_entries(queue=queue, conn=conn)
    log.warning("%squeue %r: dropped %d processing entry(ies) that are not run ids: %r", who, queue, len(removed), removed[:5])
