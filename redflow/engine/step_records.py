"""Step records sent behind: a first-time step does not wait for its record.

A step's record used to be a round trip of its own: the slot sent it and
waited for the answer before the next step, at saturation a send, a receive
and two trips through the hub per step, most of a short step's cost. Here
a record made while the attempt's lease is fresh (written less than half a
lease ago, so it cannot have lapsed) is kept on the attempt and leaves with
whichever comes first:

- its settle (``settle_run.lua`` writes the records once the fence holds):
  a workflow of fast steps costs one round trip and one script call, as a
  run with none does;
- the attempt's next wait of any kind (a step's own I/O, a sleep, a call to
  Redis): a hub callback sends them then, without waiting, as further
  records of one ``save_step`` (one FCALL for all of them);
- a call of the attempt's fence that waits (a durable wait's record, an
  ownership check, a stale lease's record): sent before it, in order, on the
  same connection.

What this changes, as Temporal's local activities do (their results ride on
the next workflow task's completion): a crash of the worker before the
records left re-runs those steps, which at-least-once always allowed (a
crash between a step's function and its record did that before), and the
window is the code a slot runs without waiting on anything, since any wait
sends them. What a refused record says (the lease lost, a cancel pending)
is heard when its reply comes back and heeded at the attempt's next step
boundary or fenced call (:meth:`Fence.heed_behind`), one step later than
before; a step that runs long meanwhile is covered by the lease keeper,
which finds a lost lease at its next renewal and a cancel within a tick.
A send that failed (the connection broke, Redis lost the library) is sent
again, waiting, at the next boundary, and carried by the settle if none
comes first. Only a worker's shared connections send behind
(``MuxConnection.send``); a slot on a connection of its own (TLS, a
cluster) records each step as it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent

from redflow.engine.lease import Lease
from redflow.store.mux_connection import MuxConnection
from redflow.store.replies import StepSaved
from redflow.store.requests import StepRecord

#: Sends records without waiting: (records, check the lease?, on_reply) (``Scripts.send_steps``, bound).
Send = Callable[[Sequence[StepRecord], bool, Callable[[Any], object]], None]


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


class BehindRecords:
    """The records of one attempt not sent yet, and what the sent ones' replies said."""

    __slots__ = ("_send", "_lease", "_lease_ms", "_pending", "_scheduled", "_waited", "failed", "verdict")

    def __init__(self, send: Send, lease: Lease, lease_ms: int) -> None:
        self._send, self._lease, self._lease_ms = send, lease, lease_ms
        self._pending: list[StepRecord] = []
        self._scheduled = False
        self._waited = False  # the attempt waited on something since its step began
        #: A send that failed (its records are pending again): the next boundary sends them, waiting.
        self.failed: Exception | None = None
        #: The first reply that refused a record or told of a cancel: (the last record's name, the reply).
        self.verdict: tuple[str, StepSaved] | None = None

    @staticmethod
    def supported(conn: object) -> bool:
        """Whether ``conn`` sends without waiting (a worker's shared connection, ``MuxConnection.send``)."""
        return isinstance(conn, MuxConnection)

    def fresh(self) -> bool:
        """Whether the attempt's lease was written less than half a lease ago (so cannot have lapsed)."""
        return self._lease.fresh(self._lease_ms, _mono_ms())

    def step_begins(self) -> None:
        """A first-time step begins: from here on, whether it waits on anything is watched
        (a hub callback runs only once the attempt's greenlet waits)."""
        self._waited = False
        self._watch()

    def _watch(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            gevent.get_hub().loop.run_callback(self._at_wait)

    def may_keep(self) -> bool:
        """Whether the step that just ended may be recorded behind: it waited on nothing since
        it began (its record's round trip would have been most of its cost, and it had no I/O
        a record must precede) and the lease is fresh."""
        return not self._waited and self.fresh()

    def add(self, record: StepRecord) -> None:
        """Keep ``record``; it leaves at the attempt's next wait unless a call carries it first."""
        self._pending.append(record)
        self._watch()  # (armed by the step's start already, unless a caller records without one)

    def take(self) -> list[StepRecord]:
        """The pending records, for a call that carries them (the settle, a waiting resend)."""
        records, self._pending = self._pending, []
        return records

    def send_now(self) -> None:
        """Send the pending records without waiting (before a call of the fence that waits)."""
        records = self.take()
        if not records:
            return
        try:
            self._send(records, not self.fresh(), self._hear(records, _mono_ms()))
        except Exception as exc:  # the connection could not be opened: the next boundary resends them
            self._pending[:0] = records
            self.failed = self.failed or exc

    def _at_wait(self) -> None:
        # In the hub, once the attempt's greenlet waits on something: what is pending leaves now.
        self._scheduled = False
        self._waited = True
        if self.failed is None:  # after a failed send, the next boundary resends them, waiting
            self.send_now()

    def _hear(self, records: list[StepRecord], sent_ms: float) -> Callable[[Any], None]:
        def heard(reply: Any) -> None:  # in the hub: records what the reply says, raises nothing
            if isinstance(reply, Exception):
                self._pending[:0] = records
                self.failed = self.failed or reply
                return
            saved = StepSaved.parse(reply)
            lease = self._lease
            if saved.renewed:
                lease.written(sent_ms)
            lease.tracked_at_ms = max(lease.tracked_at_ms, sent_ms)  # it told the cancel flag as of the send
            if self.verdict is None and (saved.state != "saved" or saved.cancel_requested_at):
                self.verdict = (records[-1].name, saved)

        return heard
