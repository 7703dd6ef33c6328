"""The worker's side of durable waits and fan-out, around the attempts.

- When a ``run_workflows`` child ends here, its parent is told
  (``child_ended``): the last child to end sends a parked parent to ready.
  The report is a separate call on the parent's hash slot (another queue,
  on a cluster another master); if it is lost (a crash right after the
  settle), the parent's own periodic look at its children finds the end.
- When a run ends canceled here, its unfinished children are canceled too.
- :class:`ScheduledEvents` delivers ``schedule_event`` events to the runs
  waiting for them since before they fired, each event claimed by one
  worker (subscribers' runs were enqueued at scheduling time, as delayed runs).
Runs that use none of this cost nothing here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from redflow.core.errors import CorruptDataError
from redflow.core.models import scheduled_event_of
from redflow.store.bulk import cancel_error_json
from redflow.store.children import cancel_children, tell_parent
from redflow.store.events import deliver_scheduled
from redflow.store.port import Store
from redflow.store.replies import ClaimedEvent

log = logging.getLogger("redflow.parking")

#: The error a parked run gets when a cancel was pending as it parked.
CANCELED_JSON = cancel_error_json(None)
SCHEDULED_EVENTS_BATCH = 50
SCHEDULED_EVENTS_IDLE_S = 2.0  # the longest a pass sleeps (an event scheduled meanwhile waits that long at most)


def after_end(store: Store, run_id: str, final: str, parent_link: tuple[str, str] | None, log_extra: Callable[[], dict[str, Any]]) -> None:
    """A run this worker ended (``final``): report it to a parent that waits for
    it (``parent_link``: its id and queue), and cancel its children if it ended
    canceled. Both are best effort: the parent looks at its children by
    itself too, and a failure is logged."""
    try:
        if parent_link is not None:
            tell_parent(store, run_id, *parent_link)
        if final == "canceled":
            cancel_children(store, run_id)
    except RedisError as exc:
        log.warning("run %s ended %s, but telling its parent or canceling its children failed (%s)", run_id, final, exc, extra=log_extra())


class ScheduledEvents:
    """Delivers due scheduled events to waiting runs. Every worker looks; each
    due event is claimed by one (``claim_scheduled_events``), in fire order, and
    removed once delivered; no later event of its name is claimed meanwhile. A
    claim not removed within ``claim_ms`` (its worker died or froze) is taken
    again by the next look: the delivery is repeated, which resolves no wait
    twice and none that began after the event fired."""

    def __init__(self, store: Store, *, claim_ms: int) -> None:
        self.store = store
        self.claim_ms = claim_ms

    def step(self) -> float:
        store = self.store
        claim = store.scripts.claim_scheduled_events(most=SCHEDULED_EVENTS_BATCH, claim_ms=self.claim_ms)
        for taken in claim.events:
            self._deliver(taken)
        if claim.events:
            store.redis.zrem(store.keys.scheduled_events(), *(taken.member for taken in claim.events))  # all delivered
            return 0.0  # more may be due: look again at once
        if claim.next_ms is None:
            return SCHEDULED_EVENTS_IDLE_S
        return min(SCHEDULED_EVENTS_IDLE_S, max(0.01, (claim.next_ms - claim.now_ms) / 1000.0))

    def _deliver(self, taken: ClaimedEvent) -> None:
        """Deliver one claimed event. One that cannot be read is dropped with an
        error logged (taken again, it would fail again, with the events claimed after it)."""
        event = scheduled_event_of(taken.entry)
        try:
            if event is None:
                raise CorruptDataError("not the JSON {id, event, payloadJson} of schedule_event")
            deliver_scheduled(self.store, *event, taken.fired_at)
        except CorruptDataError as exc:
            log.error("dropped a scheduled event that cannot be read (%s): %.200r", exc, taken.entry)
