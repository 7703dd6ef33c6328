"""Flow control in the worker: what the scripts cannot do alone.

The limits themselves are kept by the scripts that start and end runs
(``store/lua/limits.lua``, ``priority.lua``; see ``redflow/core/flow.py`` for
the values). Here:

* :func:`limited_names`: the worker's workflows with limits, passed to the
  start scripts, so that a run another client enqueued without its limits
  (the client did not know the workflow) is handed back to be admitted;
* :func:`start_admitted`: compute such a run's limits and start it with them;
* :class:`FlowSweeper`: a slow pass that re-counts the units of limits with
  held runs and wakes as many as are free (a unit lost on the way, e.g. a run
  ended by a worker that knows nothing of limits, never keeps runs held for
  good), and puts back a priority marker a foreign worker dropped.
"""

from __future__ import annotations

import dataclasses
import logging

from redflow.core.flow import limits_spec
from redflow.core.keys import new_id
from redflow.core.models import RunField
from redflow.core.workflow_def import Registry
from redflow.engine.rotation import Rotation
from redflow.store.payloads import read_blobs
from redflow.store.port import Store
from redflow.store.replies import StartReply
from redflow.store.requests import StartRequest
from redflow.store.scripts import Conn

log = logging.getLogger("redflow.limits")

#: The start scripts' word for "this run has no limits" (it starts as it is).
NO_LIMITS = "-"
#: Prioritized sets a pass looks at for a lost marker (in turn over the worker's queues).
MARKER_QUEUES_PER_PASS = 8


def limited_names(registry: Registry) -> str:
    """The names of ``registry``'s workflows with limits, as the start scripts
    take them ("\\n"-separated, with a "\\n" at each end; "" when none)."""
    names = [wf.name for wf in registry.list() if wf.flow.active]
    return "\n" + "\n".join(names) + "\n" if names else ""


def start_admitted(
    store: Store, registry: Registry, request: StartRequest, reply: StartReply, *, conn: Conn
) -> tuple[StartReply, Exception | None]:
    """Start a run handed back with ``admit`` (to ``request``) again, with the
    limits its workflow declares computed from its input. A key function that
    fails on the input fails the run (it starts without limits so that it can
    be settled): returned with the new start reply."""
    workflow = registry.get(reply.workflow)
    limits, refused = NO_LIMITS, None
    if workflow is not None and workflow.flow.active:
        try:
            raw = reply.detail or "null"  # a @blob: reference is read from the run's blob hash
            blobs = read_blobs(store.redis, store.keys.run_blobs(request.run_id, request.queue), (raw,))
            value = workflow.validate(store.payloads.loads_stored(raw, blobs, run_id=request.run_id, field=RunField.INPUT_JSON))
            limits = limits_spec(store.keys, workflow.name, request.queue, workflow.flow, value)
        except Exception as exc:  # bad input: the run fails (an unreadable input is reported again by the attempt)
            refused = exc
    again = dataclasses.replace(request, now_ms=store.now_ms(), limits_json=limits)
    return store.scripts.start_run(again, conn=conn), refused


class FlowSweeper:
    """One pass per interval: heal limits with held runs (one worker per pass
    and scope, by a lock that expires), restore lost priority markers (of
    MARKER_QUEUES_PER_PASS queues a pass, in turn)."""

    def __init__(self, store: Store, queues: list[str], *, interval_s: float) -> None:
        self.store = store
        self.queues = sorted(set(queues))
        self._rotation = Rotation(self.queues, MARKER_QUEUES_PER_PASS)
        self.interval_s = interval_s
        self._token = new_id("limitslock")
        self.woken = 0

    def step(self) -> float:
        self._restore_markers()
        for scope in self.queues if self.store.keys.cluster else [None]:
            self._heal(scope)
        return self.interval_s

    def _restore_markers(self) -> None:
        keys, scripts = self.store.keys, self.store.scripts
        queues = self._rotation.next()
        pipe = self.store.pipeline()
        for queue in queues:
            pipe.zcard(keys.queue_prioritized(queue))
        for queue, waiting in zip(queues, pipe.execute()):
            if waiting and scripts.ensure_marker(queue=queue):
                log.warning(
                    "queue %r: %d prioritized run(s) had no marker in ready (a worker that knows no priorities dropped it?); put it back",
                    queue,
                    waiting,
                )

    def _heal(self, scope: str | None) -> None:
        keys, redis, scripts = self.store.keys, self.store.redis, self.store.scripts
        if not redis.set(keys.lock_limits(scope), self._token, nx=True, px=max(1, int(self.interval_s * 1000))):
            return  # another worker heals this scope in this interval
        held_keys = sorted(redis.hkeys(keys.limits_held_index(scope)))
        if not held_keys:
            return
        batch = scripts.batch()
        for held_key in held_keys:
            scripts.heal_limit(held_key=held_key, queue=scope, conn=batch)
        woken = sum(batch.execute())
        if woken:
            self.woken += woken
            log.debug("limits: the sweeper woke %d held run(s) for free units", woken)
