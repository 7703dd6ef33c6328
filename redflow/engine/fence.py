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
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

from redis.exceptions import RedisError

from redflow.client_waits import cancel_children
from redflow.core.models import RunField
from redflow.engine.context import CANCELED, REDIS_LOST, RunInterrupt

if TYPE_CHECKING:
    from redflow.engine.attempt import Attempt
    from redflow.store.scripts import Ownership

log = logging.getLogger("redflow.fence")

#: An attempt whose lease was last written longer ago than this share of
#: the lease confirms it owns its run before a new step. On time, the keeper
#: renews at half the lease (plus a tick and a round trip).
STALE_AFTER = 0.75

T = TypeVar("T")


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


def confirm_before_step(attempt: Attempt) -> None:
    """A new step is about to run: if the lease may have lapsed, make sure the
    attempt still owns its run, else stop it (raises ``RunInterrupt``)."""
    if _mono_ms() - attempt.lease.renewed_at_ms < attempt.rt.lease_ms * STALE_AFTER:
        return
    _stop_unless_owned(attempt, _confirm(attempt))


def start_children(attempt: Attempt, create: Callable[[], T]) -> T:
    """Run ``create`` (it starts child runs of the attempt's run, each listed
    in the run's children index before it exists), then read the run again
    and cancel the children if it is canceled or asked to be. No interrupt
    lands in between: the keeper's "lease lost" waits until the read is done."""
    attempt.children_unchecked = True  # until the read below is done (see cancel_if_canceled)
    with attempt.interrupts_held():
        created = create()
        seen = _confirm(attempt)
        if seen.canceled:
            _cancel_children(attempt)
        attempt.children_unchecked = False
    _stop_unless_owned(attempt, seen)
    return created


def cancel_if_canceled(attempt: Attempt) -> None:
    """An abandoned attempt that started children and was stopped before it
    read its run again: cancel them if the run is canceled or asked to be.
    (A cancel made later reads the children index after all of them.)"""
    run_key = attempt.rt.keys.run(attempt.run_id, attempt.queue)
    try:
        status, cancel_at = attempt.client.redis.hmget(run_key, [RunField.STATUS, RunField.CANCEL_REQUESTED_AT])
        if status == "canceled" or cancel_at:
            cancel_children(attempt.client, attempt.run_id)
    except RedisError as exc:
        log.warning("run %s: could not look whether the children it started must be canceled (%s)", attempt.run_id, exc,
                    extra=attempt.log_extra())  # fmt: skip


def _confirm(attempt: Attempt) -> Ownership:
    sent_ms = _mono_ms()
    try:
        seen = attempt.rt.scripts.confirm_run(
            run_id=attempt.run_id, queue=attempt.queue, token=attempt.token, lease_ms=attempt.rt.lease_ms, conn=attempt.conn
        )
    except RedisError as exc:
        _redis_lost(attempt, exc)
    if seen.owned:  # the script kept the lease for another lease_ms
        attempt.lease.renewed_at_ms = max(attempt.lease.renewed_at_ms, sent_ms)
    return seen


def _cancel_children(attempt: Attempt) -> None:
    try:
        cancel_children(attempt.client, attempt.run_id)
    except RedisError as exc:
        _redis_lost(attempt, exc)  # children_unchecked stays set: the abandoned attempt tries again


def _redis_lost(attempt: Attempt, exc: RedisError) -> NoReturn:
    """Redis failing here is the engine's trouble, not the handler's: abandon the attempt (as a step record does)."""
    log.warning("run %s: could not confirm it still owns the run (%s); leaving it to be recovered", attempt.run_id, exc,
                extra=attempt.log_extra())  # fmt: skip
    attempt.interrupt(REDIS_LOST)
    raise RunInterrupt(REDIS_LOST) from exc


def _stop_unless_owned(attempt: Attempt, seen: Ownership) -> None:
    if seen.status == "canceled" or (seen.owned and seen.cancel_requested_at):
        attempt.interrupt(CANCELED)
    elif not seen.owned:
        attempt.rt.keeper.report_lost(attempt.lease, f"it does not own the run any more (status {seen.status or 'gone'}); no further step")
    attempt.raise_if_interrupted()
