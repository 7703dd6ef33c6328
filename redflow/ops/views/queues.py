"""Queues and workflows as the commands and the dashboard list them: the names
some worker or client synced, and how many runs sit in each list of a queue."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from redflow.client import RedflowClient
from redflow.core.flow import PRIORITY_MARKER

#: How far ``queue_counts`` looks for priority markers from the end where they
#: sit: a marker is pushed at the claim end of ready (only a reaped run is
#: pushed behind it before it is claimed), and a claim moves it to the head of
#: processing. A bound keeps the look cheap on a deep list.
MARKER_SCAN = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many runs sit in each list of one queue (``prioritized``: runs with a
    priority > 0, waiting apart from ready, where one marker entry stands for
    them; the marker is no run and is not counted in ``ready`` or ``processing``)."""

    queue: str
    ready: int
    processing: int
    scheduled: int
    prioritized: int = 0


def workflow_names(client: RedflowClient) -> list[str]:
    """Names of the workflows some worker or client synced."""
    return sorted(client.redis.smembers(client.keys.workflows()))


def known_queues(client: RedflowClient) -> list[str]:
    """Queues named by synced workflows and triggers (see ``RedflowClient.known_queues``)."""
    return client.known_queues()


def index_queues(client: RedflowClient) -> list[str | None]:
    """The queues whose run indexes to read: every known one on a cluster (indexes are per queue
    there); ``[None]`` otherwise, the one global index."""
    return list(known_queues(client)) if client.keys.cluster else [None]


def queue_counts(client: RedflowClient, queues: Iterable[str] | None = None) -> list[QueueCounts]:
    """Ready / processing / scheduled / prioritized counts of ``queues`` (default:
    :func:`known_queues`), one round trip; priority markers are not runs."""
    keys = client.keys
    names = list(queues) if queues is not None else known_queues(client)
    pipe = client.redis.pipeline(transaction=False)
    for queue in names:
        for lst, rank in ((keys.queue_ready(queue), -1), (keys.queue_processing(queue), 1)):
            pipe.llen(lst)
            pipe.lpos(lst, PRIORITY_MARKER, rank=rank, count=0, maxlen=MARKER_SCAN)
        pipe.zcard(keys.queue_scheduled(queue))
        pipe.zcard(keys.queue_prioritized(queue))
    replies = pipe.execute()
    counts = []
    for i, queue in enumerate(names):
        ready, ready_markers, processing, processing_markers, scheduled, prioritized = replies[6 * i : 6 * i + 6]
        counts.append(QueueCounts(queue, ready - len(ready_markers), processing - len(processing_markers), scheduled, prioritized))
    return counts
