"""The index of runs parked in ``step.wait_for_event``, and delivering an event to them.

``P:event:waiters:<event>`` (hash: run id -> :class:`EventWaiter` JSON) is
written (``register_waiter``) when a run parks in a wait, after the step's
waiting record is stored, and read when the event is emitted, in the same
round trip as the subscriber lookup, so an event nobody waits for costs what
it did before. Each matching waiter gets one ``deliver_event`` script (all
in one batch), on its run's hash slot: it lands at most once per wait,
because the step's record must still be the waiting record the entry names.
A scheduled event, delivered when it fires (maybe late, maybe again after
its deliverer died), reaches only the waits whose entry is older than its
fire time. An entry goes once its wait has ended (``forget_waiters``, which
keeps an entry the run wrote again meanwhile).
"""

from __future__ import annotations

from collections.abc import Mapping

from redflow.core.models import EventWaiter
from redflow.store.payloads import Payloads
from redflow.store.scripts import Scripts

#: Replies of ``deliver_event`` after which the entry has no use any more.
_ENDED = frozenset({"resumed", "delivered", "done", "gone"})


def register(scripts: Scripts, event: str, waiter: EventWaiter) -> None:
    """Add a run's entry to ``event``'s waiter index (the same wait again keeps its entry and stamp)."""
    scripts.register_waiter(event=event, run_id=waiter.run_id, head=waiter.head())


def forget(scripts: Scripts, event: str, waiter: EventWaiter) -> None:
    """Drop a run's entry, unless it names another wait since (a newer one)."""
    scripts.forget_waiters(event=event, entries=[(waiter.run_id, waiter.head())])


def deliver(
    scripts: Scripts,
    payloads: Payloads,
    event: str,
    payload_json: str,
    entries: Mapping[str, str],
    now_ms: int,
    fired_at_ms: float | None = None,
) -> list[str]:
    """Resolve the waits among ``entries`` (the event's index) whose match the
    payload satisfies and, for a scheduled event (``fired_at_ms``: its fire
    time, Redis ms), that began before it fired; returns the ids of the runs
    it was delivered to."""
    payload = payloads.loads(payload_json, what=f"payload of event {event!r}")
    unreadable: list[tuple[str, str]] = []
    matching: list[tuple[EventWaiter, str]] = []
    for run_id, raw in entries.items():
        waiter = EventWaiter.from_json(run_id, raw)
        resolved = waiter.resolved(payload_json, now_ms) if waiter is not None else None
        if waiter is None or resolved is None:
            unreadable.append((run_id, raw))
        elif (fired_at_ms is None or waiter.began_before(fired_at_ms)) and waiter.accepts(payload):
            matching.append((waiter, resolved))
    batch = scripts.batch()
    for waiter, resolved in matching:
        scripts.deliver_event(
            run_id=waiter.run_id, queue=waiter.queue, step=waiter.step, waiting=waiter.record, resolved=resolved, now_ms=now_ms, conn=batch
        )
    replies = batch.execute() if matching else []
    ended = unreadable + [(w.run_id, entries[w.run_id]) for (w, _), reply in zip(matching, replies) if reply in _ENDED]
    if ended:
        scripts.forget_waiters(event=event, entries=ended)
    return [w.run_id for (w, _), reply in zip(matching, replies) if reply in ("resumed", "delivered")]
