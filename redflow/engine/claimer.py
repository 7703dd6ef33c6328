"""Claimers: one blocking wait per queue, not one per slot (issue 34).

Before, every idle slot of a worker held a blocking connection and, with
several queues, probed each of them every second: an idle ``-c 500`` worker
on 50 queues sent ~49,000 commands/s over ~517 connections. Here a worker
has one :class:`Claimer` per queue, each with its own connection, and its
idle slots wait on the board (engine/board.py) without talking to Redis:

- **claim**: while the worker has an idle slot no claimer has reserved (and
  no queue is marked that idle slots could take from), a claimer reserves
  one and waits in ``BLMOVE ready processing RIGHT LEFT``: the run moves
  into processing atomically (a queued run is always in ready or
  processing), the claimer starts it on its own connection and hands it to
  the reserved slot, which runs it. Only one worker of a fleet wakes for a
  run. A run found at once (a backlog) also marks the queue, so that the
  other idle slots take from it side by side.
- **watch**: otherwise the claimer waits in ``BLMOVE ready ready RIGHT
  RIGHT``, which pops the tail and pushes it back where it was: a blocking
  "is there anything", moving nothing. When it returns and an idle slot is
  free (a busy queue at its limit left it: engine/queue_limit.py), the
  claimer takes the run on its own connection and hands it over; else the
  queue is marked on the board and the claimer waits until a slot finds the
  queue empty (or its timeout).
- A queue marked while claimers reserve idle slots: they are unblocked
  (``CLIENT UNBLOCK``, their BLMOVE returns nothing) and give the slots up.

A claimer starts what it hands on its own connection because a busy
worker's shared connections answer a slot's call behind every run in flight
(tens of ms at ``-c 500``), while the claimer's answers it alone.

Idle, a worker sends one BLMOVE per queue per ``timeout_s`` whatever its
slot count, and holds one connection per queue. On a cluster each
claimer's connection goes to its queue's master, and ``unblock`` is sent
there (by the queue's key).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import gevent
from redis.exceptions import RedisError

from redflow.core.keys import Keys
from redflow.engine.board import Board, Work
from redflow.engine.claim import Claimed
from redflow.store.slot_connection import ClusterSlotConnection, SlotConnection

log = logging.getLogger("redflow.claimer")

CLAIM_TIMEOUT_S = 5.0
#: A claim answered sooner than this found a run waiting (a backlog, not a run it woke for).
BACKLOG_HINT_S = 0.001
BACKOFF_S = 0.5

#: A claimer's own connection (on a cluster, to its queue's master).
BlockingConnection = SlotConnection | ClusterSlotConnection


class Starter(Protocol):
    """What starts the runs a claimer hands (engine/claim.py's ``SlotClaimer``)."""

    def started(self, conn: BlockingConnection, work: Work) -> Claimed | None: ...


class Claimer:
    """One queue's blocking wait, on a connection of its own."""

    def __init__(self, board: Board, keys: Keys, queue: str, conn: BlockingConnection, starter: Starter, *,
                 timeout_s: float = CLAIM_TIMEOUT_S) -> None:  # fmt: skip
        self.board, self.queue, self.conn, self.starter, self.timeout_s = board, queue, conn, starter, timeout_s
        self.ready, self.processing = keys.queue_ready(queue), keys.queue_processing(queue)
        self.client_id: int | None = None  # the connection's, while it waits in a claim (CLIENT UNBLOCK)
        self.claiming = False
        self.revoked = False  # an unblock is on its way to its claim
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
            self.client_id = self.conn.client_id(self.ready)  # cached per connection: no command but after a reconnect
            self.claiming, self.revoked = True, False
            began = time.monotonic()
            blmove = ("BLMOVE", self.ready, self.processing, "RIGHT", "LEFT", self.timeout_s)
            run_id = None if self.board.busy else self.conn.execute(*blmove, block_s=self.timeout_s)
        except BaseException:
            self.board.unreserve()
            raise
        finally:
            self.claiming = False
        if not run_id:
            self.board.unreserve()
            return
        waited_s = time.monotonic() - began
        self._hand(Work(self.queue, str(run_id), waited_s))
        if waited_s < BACKLOG_HINT_S and self.board.unreserved > 0:
            self.board.mark(self.queue)  # found at once: likely more behind it, for idle slots to take side by side

    def _hand(self, work: Work) -> Claimed | None:
        """Start ``work``'s run (or take the queue's next) on this connection and hand it to
        the slot reserved for it (the reservation is given up if there is none, or on an error:
        a run moved but not started waits in processing for the reaper)."""
        try:
            claimed = self.starter.started(self.conn, work)
        except BaseException:
            self.board.unreserve()
            raise
        if claimed is None:
            self.board.unreserve()
        elif not self.board.hand(Work(self.queue, claimed.run_id, work.waited_s, taken=claimed)):
            log.warning("claimer of %r: run %s started as the worker stopped; the reaper returns it to ready", self.queue, claimed.run_id)
        return claimed

    def _watch(self) -> None:
        """No slot to reserve: wait until the queue holds a run, without moving it."""
        if self.conn.execute("BLMOVE", self.ready, self.ready, "RIGHT", "RIGHT", self.timeout_s, block_s=self.timeout_s) is None:
            return
        if self.board.reserve():  # an idle slot is free: the run is taken here and goes to it
            claimed = self._hand(Work(self.queue, None))
            if claimed is None or claimed.left <= 0:
                return
        self.board.mark(self.queue)
        # no command while it stays marked: a slot's take or settle finds it empty (or the worker stops)
        while not self._stopping and not self.board.wait_drained(self.queue, self.timeout_s) and self.board.is_marked(self.queue):
            pass


class Claimers:
    """A worker's claimers, one per queue; ``unblock([(key, client_id), ...])`` sends CLIENT
    UNBLOCK on other connections, each to the node that holds ``key`` (a claimer's ready list)."""

    def __init__(self, board: Board, keys: Keys, queues: Sequence[str], connect: Callable[[], BlockingConnection],
                 unblock: Callable[[list[tuple[str, int]]], object], starter: Starter, *,
                 timeout_s: float = CLAIM_TIMEOUT_S) -> None:  # fmt: skip
        self.board = board
        self.claimers = [Claimer(board, keys, queue, connect(), starter, timeout_s=timeout_s) for queue in queues]
        self._unblock = unblock
        board.revoke = self.revoke

    def start(self) -> Claimers:
        for claimer in self.claimers:
            claimer.start()
        return self

    def revoke(self) -> None:
        """Unblock the claimers waiting in a claim, so that they give their reserved slots
        up to a marked queue (each then watches its queue instead, while slots are busy)."""
        revoked = [claimer for claimer in self.claimers if claimer.claiming and not claimer.revoked and claimer.client_id is not None]
        for claimer in revoked:
            claimer.revoked = True
        if revoked:
            gevent.spawn(self._unblock_all, revoked)

    def _unblock_all(self, claimers: list[Claimer]) -> None:
        blocked = [(c.ready, c.client_id) for c in claimers if c.claiming and c.client_id is not None]
        try:
            if blocked:
                self._unblock(blocked)
        except RedisError as exc:  # their claims end by their timeout instead
            log.info("claimers: CLIENT UNBLOCK failed (%s)", exc)

    def stop(self) -> None:
        """Claimers first (a run one of them moved meanwhile still reaches a slot), then the board."""
        for claimer in self.claimers:
            claimer.stop()
        gevent.joinall([c.greenlet for c in self.claimers if c.greenlet is not None], timeout=2)
        self.board.close()
        for claimer in self.claimers:
            claimer.conn.close()
