"""The worker's side of durable waits and fan-out, around the attempts.

- When a ``run_workflows`` child ends here, its parent is told
  (``child_ended``): the last child to end sends a parked parent to ready.
  The report is a separate call on the parent's hash slot (another queue,
  on a cluster another master); if it is lost (a crash right after the
  settle), the parent's own periodic look at its children finds the end.
- When a run ends canceled here, its unfinished children are canceled too.
- :class:`ScheduledEvents` delivers ``schedule_event`` events to the runs
  waiting for them when they fire (subscribers' runs were enqueued at
  scheduling time, as delayed runs).
Runs that use none of this cost nothing here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from redflow.client_waits import cancel_children, deliver_event
from redflow.core.models import scheduled_event_of
from redflow.store.bulk import cancel_error_json

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.engine.attempt import Attempt

log = logging.getLogger("redflow.parking")

#: The error a parked run gets when a cancel was pending as it parked.
CANCELED_JSON = cancel_error_json(None)
SCHEDULED_EVENTS_BATCH = 50
SCHEDULED_EVENTS_IDLE_S = 1.0


def after_end(attempt: Attempt, final: str) -> None:
    """A run this worker ended: report it to a parent that waits for it, and
    cancel its children if it ended canceled. Both are best effort: the
    parent looks at its children by itself too, and a failure is logged."""
    client, run_id = attempt.client, attempt.run_id
    try:
        if attempt.parent_link is not None:
            parent_id, parent_queue = attempt.parent_link
            client.scripts.child_ended(child_id=run_id, parent_id=parent_id, parent_queue=parent_queue, now=client.now_ms())
        if final == "canceled":
            cancel_children(client, run_id)
    except RedisError as exc:
        log.warning("run %s ended %s, but telling its parent or canceling its children failed (%s)", run_id, final, exc,
                    extra=attempt.log_extra())  # fmt: skip


class ScheduledEvents:
    """Delivers due scheduled events to waiting runs; every worker looks (a
    wait resolves once whoever delivers), each event is dropped once delivered."""

    def __init__(self, client: RedflowClient) -> None:
        self.client = client

    def step(self) -> float:
        client, key = self.client, self.client.keys.scheduled_events()
        now = client.now_ms()
        pipe = client.redis.pipeline(transaction=False)
        pipe.zrangebyscore(key, "-inf", now, start=0, num=SCHEDULED_EVENTS_BATCH)
        pipe.zrange(key, 0, 0, withscores=True)
        due, head = pipe.execute()
        for member in due:
            event = scheduled_event_of(member)
            if event is None:
                log.error("dropped a scheduled event that cannot be read: %.200r", member)
            else:
                deliver_event(client, *event)
        if due:
            client.redis.zrem(key, *due)  # all delivered (a delivery lands at most once per wait)
            return 0.0  # more may be due: look again at once
        if not head:
            return SCHEDULED_EVENTS_IDLE_S
        due_ms: float = head[0][1]
        return min(SCHEDULED_EVENTS_IDLE_S, max(0.01, (due_ms - client.now_ms()) / 1000.0))
