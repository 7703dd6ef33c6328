"""Ownership at step boundaries, and the child runs a step starts.

A worker stalled past its lease (SIGSTOP, a long GC pause, a starved CPU)
wakes holding attempts it may have lost: another worker may run the run
now, or a client canceled it (a running run whose lease is gone is canceled
at once, its children with it). Its step records and its settle are fenced
by the scripts; what it would do next is not: call a step function, start
child runs. So:

- **Before a new step** (not a replayed one), an attempt whose lease was
  last written longer ago than :data:`STALE_AFTER` of the lease confirms
  that it still owns its run: one round trip fenced by its lease token
  (``confirm_run.lua``). Lost, it stops with nothing recorded and no step
  run; canceled, it stops as canceled. The keeper renews every half lease,
  so while it is on time this costs nothing.
- **Step records** (and a signal wait's take, which records its step):
  each write is fenced by the lease token inside its script (by the run
  hash's fence alone while the lease was written less than half a lease
  ago, so cannot have expired, as the settle's is); one refused
  reports the lease lost, one that finds a cancel pending stops the
  attempt as canceled, and Redis failing abandons it (recovered later).
  The record of a step that waited on nothing (no I/O), made while the
  lease is fresh, is sent behind (engine/step_records.py): with the settle
  or at the attempt's next wait, its reply heeded at the next step boundary
  or fenced call.
- **Child runs** (``run_workflows``, ``run_workflow``): every canceler
  marks the run first (``cancelRequestedAt``, or ``canceled``) and reads
  its children index after; a creator lists each child before the child
  exists and, once created, reads its run again (the same script) with
  interrupts held off until it has, and cancels the children if the run is
  canceled or asked to be. A child the canceler's read missed was listed
  after that read, so created after the mark, so the creator's read comes
  after the mark too and sees it (docs/guarantees.md, "Children of a
  canceled run"). An attempt stopped before its read (an error, a step's
  timeout) does it when it is abandoned.

Runs that start no children pay nothing here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar, cast

from redis.exceptions import RedisError

from redflow.core.models import RunField
from redflow.engine.interrupts import CANCELED, REDIS_LOST, RunInterrupt
from redflow.engine.lease import Lease, LeaseKeeper
from redflow.engine.step_records import BehindRecords
from redflow.store.children import cancel_children
from redflow.store.port import Store
from redflow.store.replies import Ownership, StepSaved
from redflow.store.requests import SignalTake, StepRecord
from redflow.store.scripts import CommandSender, Conn

log = logging.getLogger("redflow.fence")

#: An attempt whose lease was last written longer ago than this share of
#: the lease confirms it owns its run before a new step. On time, the keeper
#: renews at half the lease (plus a tick and a round trip).
STALE_AFTER = 0.75

T = TypeVar("T")


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class Fence:
    """The ownership checks of one attempt: its lease record (run, token, when
    last written, how to stop it), the connection it sends on, and the keeper
    that reports a lost lease. ``children_unchecked``: children were started
    and the run not read again since."""

    store: Store
    conn: Conn
    lease: Lease
    keeper: LeaseKeeper
    lease_ms: int
    children_unchecked: bool = False
    #: Step records sent behind (engine/step_records.py); None on a connection that cannot.
    behind: BehindRecords | None = None

    def __post_init__(self) -> None:
        if BehindRecords.supported(self.conn):
            self.behind = BehindRecords(self._send_records, self.lease, self.lease_ms)

    def confirm_before_step(self) -> None:
        """A new step is about to run: heed what records sent behind were told, and if the
        lease may have lapsed, make sure the attempt still owns its run, else stop it
        (raises ``RunInterrupt``)."""
        if self.behind is not None:
            self.heed_behind()
            self.behind.step_begins()
        if _mono_ms() - self.lease.renewed_at_ms < self.lease_ms * STALE_AFTER:
            return
        self._stop_unless_owned(self._confirm())

    def save_step(self, name: str, step_json: str, expected: str = "", blob: tuple[str, str] | None = None) -> str | None:
        """Record a step (and the ``blob`` its ``@blob:`` reference names), fenced by the lease
        (see :meth:`_heed`); a plain record of a step that waited on nothing, while the lease
        is fresh, is sent behind (engine/step_records.py).
        ``expected``: write only over that record; if the step holds another, it is returned."""
        behind = self.behind
        if behind is not None:
            if not expected and self.lease.stopped is None and behind.may_keep():
                behind.add(StepRecord(name, step_json, blob))
                return None
            self._before_call()
        saved = self._save(StepRecord(name, step_json, blob), expected=expected)
        return saved.current if saved.state == "changed" else None

    def _save(self, record: StepRecord, more: Sequence[StepRecord] = (), *, expected: str = "") -> StepSaved:
        """``record`` (and ``more`` after it: records sent behind whose send failed), one script
        call waited on; what the reply says of the attempt is heeded (see :meth:`_heed`)."""
        lease, sent_ms = self.lease, _mono_ms()
        try:
            saved = self.store.scripts.save_step(
                run_id=lease.run_id,
                queue=lease.queue,
                token=lease.token,
                name=record.name,
                step_json=record.step_json,
                lease_ms=self.lease_ms,
                expected=expected,
                blob=record.blob,
                # Written less than half a lease ago, the lease cannot have expired: the hash's fence
                # is check enough (3 commands). Older, the script reads the lease and extends it.
                check_lease=not lease.fresh(self.lease_ms, sent_ms),
                behind=more,
                conn=self.conn,
            )
        except RedisError as exc:
            self._not_recorded(record.name, exc)
        if saved.state == "stale" or saved.cancel_requested_at or lease.stopped is not None:  # the step's hot path skips the call
            self._heed(more[-1].name if more else record.name, saved)
        if saved.renewed:
            lease.written(sent_ms)
        # The reply told the run's cancelRequestedAt as of the send: the keeper's cancel poll,
        # which looks at attempts it has not heard of for a tick, can skip this one a tick longer.
        lease.tracked_at_ms = max(lease.tracked_at_ms, sent_ms)
        return saved

    def records_for_settle(self) -> list[StepRecord]:
        """The records sent behind that no call carried yet: the settle writes them first."""
        return self.behind.take() if self.behind is not None else []

    def send_behind(self) -> None:
        """An attempt abandoned: what it recorded leaves before its lease is released (best effort)."""
        if self.behind is not None:
            self.behind.send_now()

    def heed_behind(self) -> None:
        """At a step boundary: records whose send failed are sent again, waiting (Redis failing
        abandons the attempt); a refusal or a cancel one of them was told stops it (``_heed``)."""
        behind = self.behind
        if behind is None:
            return
        if behind.failed is not None:
            behind.failed = None
            self._resend(behind.take())
        if behind.verdict is not None:
            self._heed(*behind.verdict)

    def _before_call(self) -> None:
        """A fenced call that waits: the records sent behind go first, on the same connection."""
        self.heed_behind()
        if self.behind is not None:
            self.behind.send_now()

    def _send_records(self, records: Sequence[StepRecord], check_lease: bool, on_reply: Callable[[Any], object]) -> None:
        lease = self.lease
        self.store.scripts.send_steps(
            run_id=lease.run_id, queue=lease.queue, token=lease.token, records=records, lease_ms=self.lease_ms,
            check_lease=check_lease, conn=cast(CommandSender, self.conn), on_reply=on_reply,
        )  # fmt: skip

    def _resend(self, records: list[StepRecord]) -> None:
        if records:
            self._save(records[0], records[1:])

    def take_signal(self, take: SignalTake) -> StepSaved:
        """A signal wait's look (engine/signal_waits.py): the take and its step's record, one script."""
        self._before_call()
        lease = self.lease
        try:
            looked = self.store.scripts.take_signal(
                run_id=lease.run_id, queue=lease.queue, token=lease.token, lease_ms=self.lease_ms, take=take, conn=self.conn
            )
        except RedisError as exc:
            self._not_recorded(take.step, exc)
        self._heed(take.step, looked)
        return looked

    def _heed(self, name: str, saved: StepSaved) -> None:
        """What a step's record says of the attempt: a refused write reports the lease
        lost, a cancel pending stops the run here (raises ``RunInterrupt``)."""
        lease = self.lease
        if saved.state == "stale":
            self.keeper.report_lost(lease, f"its record of step {name!r} was refused")
        elif saved.cancel_requested_at:
            lease.stop(CANCELED)
        if lease.stopped is not None:
            raise RunInterrupt(lease.stopped)

    def _not_recorded(self, name: str, exc: RedisError) -> NoReturn:
        """Redis failing while a step is recorded is the engine's trouble, not the
        handler's: the attempt is abandoned (recovered later), not failed."""
        lease = self.lease
        log.warning(
            "run %s: could not record step %r (%s); leaving the run to be recovered", lease.run_id, name, exc, extra=lease.log_extra()
        )
        lease.stop(REDIS_LOST)
        raise RunInterrupt(REDIS_LOST) from exc

    def start_children(self, create: Callable[[], T], interrupts_held: Callable[[], AbstractContextManager[None]]) -> T:
        """Run ``create`` (it starts child runs of the attempt's run, each listed
        in the run's children index before it exists), then read the run again
        and cancel the children if it is canceled or asked to be. No interrupt
        lands in between (``interrupts_held``): the keeper's "lease lost" waits
        until the read is done."""
        self._before_call()
        self.children_unchecked = True  # until the read below is done (see cancel_if_canceled)
        with interrupts_held():
            created = create()
            seen = self._confirm()
            if seen.canceled:
                self._cancel_children()
            self.children_unchecked = False
        self._stop_unless_owned(seen)
        return created

    def cancel_if_canceled(self) -> None:
        """An abandoned attempt that started children and was stopped before it
        read its run again: cancel them if the run is canceled or asked to be.
        (A cancel made later reads the children index after all of them.)"""
        if not self.children_unchecked:
            return
        lease, store = self.lease, self.store
        try:
            status, cancel_at = store.redis.hmget(
                store.keys.run(lease.run_id, lease.queue), [RunField.STATUS, RunField.CANCEL_REQUESTED_AT]
            )
            if status == "canceled" or cancel_at:
                cancel_children(store, lease.run_id)
        except RedisError as exc:
            log.warning(
                "run %s: could not look whether the children it started must be canceled (%s)", lease.run_id, exc, extra=lease.log_extra()
            )

    def _confirm(self) -> Ownership:
        lease, sent_ms = self.lease, _mono_ms()
        try:
            seen = self.store.scripts.confirm_run(
                run_id=lease.run_id, queue=lease.queue, token=lease.token, lease_ms=self.lease_ms, conn=self.conn
            )
        except RedisError as exc:
            self._redis_lost(exc)
        if seen.owned:  # the script kept the lease for another lease_ms
            lease.written(sent_ms)
        return seen

    def _cancel_children(self) -> None:
        try:
            cancel_children(self.store, self.lease.run_id)
        except RedisError as exc:
            self._redis_lost(exc)  # children_unchecked stays set: the abandoned attempt tries again

    def _redis_lost(self, exc: RedisError) -> NoReturn:
        """Redis failing here is the engine's trouble, not the handler's: abandon the attempt (as a step record does)."""
        lease = self.lease
        log.warning(
            "run %s: could not confirm it still owns the run (%s); leaving it to be recovered", lease.run_id, exc, extra=lease.log_extra()
        )
        lease.stop(REDIS_LOST)
        raise RunInterrupt(REDIS_LOST) from exc

    def _stop_unless_owned(self, seen: Ownership) -> None:
        lease = self.lease
        if seen.status == "canceled" or (seen.owned and seen.cancel_requested_at):
            lease.stop(CANCELED)
        elif not seen.owned:
            self.keeper.report_lost(lease, f"it does not own the run any more (status {seen.status or 'gone'}); no further step")
        if lease.stopped is not None:
            raise RunInterrupt(lease.stopped)
