"""Where a run's keys are: its queue on a cluster, and its parent's children index.

Outside cluster mode every run's keys are built from its id alone. In
cluster mode they carry the run's queue (its hash tag), so a run is found by
id through ``P:run-queues`` (run id -> queue), written before the run
exists: a worker may take a run the moment it is pushed and look it up by
id. A run never moves, so the answers are cached (bounded).

A child of ``step.run_workflows`` / ``step.run_workflow`` is listed in its
parent's children index (``Keys.run_children``) before it exists too, so
that a cancel of the parent finds it (engine/fence.py).
"""

from __future__ import annotations

from typing import Any

from redflow.core.keys import Keys
from redflow.core.models import RunField
from redflow.store.batch import Batch

#: How many run -> queue answers a locator keeps before it starts afresh.
QUEUE_CACHE_MAX = 100_000


class RunLocator:
    """The queue (hash slot) of a run by id, and its parent's children index."""

    def __init__(self, redis: Any, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._queues: dict[str, str] = {}

    def record(self, run_id: str, queue: str, pipe: Any = None) -> None:
        """Cluster mode: remember a new run's queue (its hash slot) by id, on
        ``pipe`` when given (sent with the run's creation), else at once."""
        if not self.keys.cluster:
            return
        self._queues[run_id] = queue
        target = pipe if pipe is not None else self.redis.pipeline(transaction=False)
        target.hset(self.keys.run_queues(), run_id, queue)
        target.sadd(self.keys.queues(), queue)
        if pipe is None:
            target.execute()

    def unlist(self, proposed_id: str, existing_id: str, children_key: str | None, now_ms: int) -> None:
        """An idempotency key named an existing run: forget the id that was not
        created (and list the existing one among the parent's children)."""
        fix = Batch(self.redis)
        if self.keys.cluster:
            self._queues.pop(proposed_id, None)
            fix.hdel(self.keys.run_queues(), proposed_id)
        if children_key is not None:
            fix.zadd(children_key, {existing_id: now_ms}, nx=True).zrem(children_key, proposed_id)
        if len(fix):
            fix.execute()

    def slot_queue(self, run_id: str) -> tuple[bool, str | None]:
        """What a run's keys need: ``(True, None)`` outside cluster mode; in it,
        ``(found, queue)`` from the run-queues hash (cached: a run never moves)."""
        if not self.keys.cluster:
            return True, None
        queue = self._queues.get(run_id)
        if queue is None:
            queue = self.redis.hget(self.keys.run_queues(), run_id)
            if queue is None:
                return False, None
            if len(self._queues) > QUEUE_CACHE_MAX:
                self._queues.clear()
            self._queues[run_id] = queue
        return True, queue

    def run_key(self, run_id: str) -> str | None:
        """The run hash's key, or None when the run cannot be found (cluster mode)."""
        found, queue = self.slot_queue(run_id)
        return self.keys.run(run_id, queue) if found else None

    def children_key(self, parent_run_id: str) -> str | None:
        """The children index of ``parent_run_id``, or None when the parent cannot be found."""
        found, parent_queue = self.slot_queue(parent_run_id)
        return self.keys.run_children(parent_run_id, parent_queue) if found else None

    def listing_batch(self, batch: Batch, children_key: str | None) -> Batch:
        """Where a new run is located and listed in its parent's children index:
        ``batch`` itself (one pipeline, in order), but for a child on a cluster
        a batch of its own, to send first: a cluster batch writes each master
        in its own pipeline, in no set order, and a child that exists must be
        listed already, for a cancel of its parent to find it (engine/fence.py)."""
        return Batch(self.redis) if children_key is not None and self.keys.cluster else batch

    def queue_of(self, run_id: str) -> str | None:
        """The queue of a run, or ``None`` if there is no such run."""
        found, queue = self.slot_queue(run_id)
        if not found:
            return None
        return queue if queue is not None else self.redis.hget(self.keys.run(run_id), RunField.QUEUE)

    def children(self, run_id: str) -> list[str]:
        """Ids of the runs started with ``run_id`` as their parent, oldest first
        (ids whose run is gone are left out)."""
        key = self.children_key(run_id)
        ids = self.redis.zrange(key, 0, -1) if key else []
        located = [(child_id, queue) for child_id in ids for found, queue in [self.slot_queue(child_id)] if found]
        if not located:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for child_id, queue in located:
            pipe.exists(self.keys.run(child_id, queue))
        return [child_id for (child_id, _), exists in zip(located, pipe.execute()) if exists]
