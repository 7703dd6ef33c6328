"""The orphan sweeper: a slow safety net under the reaper.

Invariant kept by every script: a run whose status is ``queued`` or
``running`` is in its queue's ready or processing list (a live lease may
cover it too, but never instead; a queued run may instead wait in its
queue's prioritized zset or a limit's held list, see engine/limits.py). The reaper recovers runs from processing
lists; the sweeper finds runs that break the invariant anyway: left so by
older versions (whose "busy" path removed a run's only entry), or by a
Redis that lost writes. It walks the ``runs:status:running`` index a page
per pass (no scan of the keyspace), notes the runs whose lease is gone, and
at the next pass re-checks each of them in one atomic script: still
running, still unleased and in no list, it goes to the claim end of ready.
A run is only repaired after two sightings a pass apart, so a foreign
worker's non-atomic moves are never mistaken for an orphan.
"""

from __future__ import annotations

import logging

from redflow.core.models import RunField
from redflow.engine.observers import Observers
from redflow.store.port import Store

log = logging.getLogger("redflow.sweeper")

SWEEP_INTERVAL_S = 5.0
SWEEP_BATCH = 200


class OrphanSweeper:
    """One page of the running index per pass; repairs what two passes agree on."""

    def __init__(
        self,
        store: Store,
        queues: list[str],
        *,
        interval_s: float = SWEEP_INTERVAL_S,
        batch: int = SWEEP_BATCH,
        observers: Observers | None = None,
    ) -> None:
        self.store = store
        self.queues = frozenset(queues)
        self.interval_s = interval_s
        self.batch = batch
        self._observers = observers or Observers()
        self._cursors: dict[str | None, int] = {}
        self._suspects: list[tuple[str, str]] = []
        self.repaired = 0

    def step(self) -> float:
        if self._suspects:
            self._repair(self._suspects)
        self._suspects = self._unleased_page()
        return self.interval_s

    def _repair(self, suspects: list[tuple[str, str]]) -> None:
        scripts = self.store.scripts
        batch = self.store.batch()
        for queue, run_id in suspects:
            scripts.repair_orphan(run_id=run_id, queue=queue, conn=batch)
        per_queue: dict[str, int] = {}
        for (queue, run_id), moved in zip(suspects, batch.execute()):
            if moved:
                log.warning("sweeper: run %s was running with no lease and in no list; returned to ready in %r", run_id, queue)
                per_queue[queue] = per_queue.get(queue, 0) + 1
        for queue, count in per_queue.items():
            self.repaired += count
            self._observers.on_recovered(queue, count)

    def _unleased_page(self) -> list[tuple[str, str]]:
        """The next page of running runs (of this worker's queues) whose lease is gone."""
        keys, store = self.store.keys, self.store
        index_queues: list[str | None] = [*sorted(self.queues)] if keys.cluster else [None]
        pipe = store.pipeline()
        for queue in index_queues:
            start = self._cursors.get(queue, 0)
            pipe.zrange(keys.runs_status("running", queue), start, start + self.batch - 1)
        pages = pipe.execute()
        candidates: list[tuple[str | None, str]] = []
        for queue, page in zip(index_queues, pages):
            self._cursors[queue] = 0 if len(page) < self.batch else self._cursors.get(queue, 0) + len(page)
            candidates.extend((queue, run_id) for run_id in page)
        if not candidates:
            return []
        check = store.pipeline()
        for queue, run_id in candidates:
            check.exists(keys.run_lease(run_id, queue))
            check.hget(keys.run(run_id, queue), RunField.QUEUE)
        replies = check.execute()
        unleased = []
        for index, (_, run_id) in enumerate(candidates):
            leased, queue = replies[2 * index], replies[2 * index + 1]
            if not leased and queue in self.queues:
                unleased.append((queue, run_id))
        return unleased
