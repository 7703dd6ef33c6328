"""Every Redis key redflow uses, in one place (DATA_MODEL.md).

The layout is shared with the TypeScript ``@redflow/client`` and the asyncio
``redflow`` package, so a run written by either is read here and the other
way round. ``P`` below is the prefix (default ``redflow:v1``); keys are
``P + ":" + rest`` with a trailing colon on ``P`` ignored. Composite parts
are length-prefixed with :func:`enc` so that ``a:b`` + ``c`` and ``a`` +
``b:c`` never collide.

No I/O here: this module only spells names.
"""

from __future__ import annotations

import os
from typing import Final

from redflow.core.errors import RedflowError

DEFAULT_PREFIX: Final = "redflow:v1"

RUN_STATUSES: Final = ("scheduled", "queued", "running", "succeeded", "failed", "canceled")
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})


def enc(value: str) -> str:
    """Length-prefix one composite part: ``enc("ab") == "2:ab"``."""
    return f"{len(value)}:{value}"


class Keys:
    """Key builder for one prefix. Each method documents the Redis type it names.

    **Redis Cluster** (``cluster=True``). Every Lua script must touch keys of
    one hash slot, and the scripts that matter (claim, start, settle, cancel,
    promote, reap, inline claim) each touch one run *and* its queue. So in
    cluster mode a queue and everything of the runs in it share the hash tag
    ``{q:<queue>}``: ``P:{q:emails}:ready``, ``P:{q:emails}:run:<id>``,
    ``P:{q:emails}:run:<id>:steps``, and the status / created / per-workflow
    indexes and idempotency keys become per queue (``P:{q:emails}:runs:status:queued``).
    Queues are the unit of scale: different queues land on different
    masters, and BLMOVE on a queue goes to the master of its slot. Keys no
    script combines (workflow metadata, cron and event definitions, the cron
    lock) stay untagged. Two additions locate runs by id alone:
    ``P:run-queues`` (hash run id -> queue) and ``P:queues`` (set of queue names).
    Without ``cluster`` the layout is exactly DATA_MODEL.md's, and ``queue``
    arguments of run keys are ignored.
    """

    __slots__ = ("prefix", "cluster", "_p", "_status", "_status_by_queue")

    def __init__(self, prefix: str = DEFAULT_PREFIX, *, cluster: bool = False) -> None:
        self.prefix = prefix.rstrip(":") or DEFAULT_PREFIX
        self.cluster = cluster
        self._p = self.prefix + ":"
        self._status = [f"{self._p}runs:status:{s}" for s in RUN_STATUSES]
        self._status_by_queue: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return f"Keys({self.prefix!r}{', cluster=True' if self.cluster else ''})"

    def _scoped(self, queue: str | None) -> str:
        """``P:`` or, in cluster mode, ``P:{q:<queue>}:``: where queue-scoped keys start."""
        if not self.cluster:
            return self._p
        if not queue:
            raise RedflowError("in cluster mode, run and queue keys need the run's queue")
        if "{" in queue or "}" in queue:
            raise RedflowError(f"queue names may not contain braces in cluster mode: {queue!r}")
        return f"{self._p}{{q:{queue}}}:"

    # -- workflows ---------------------------------------------------------
    def workflows(self) -> str:
        """set: names of synced workflows."""
        return self._p + "workflows"

    def workflow(self, name: str) -> str:
        """hash: workflow metadata (name, queue, maxAttempts, updatedAt, cronJson, ...)."""
        return f"{self._p}workflow:{name}"

    def workflow_runs(self, name: str, queue: str | None = None) -> str:
        """zset: run id -> createdAt ms, runs of one workflow (cluster: of one queue)."""
        return f"{self._scoped(queue)}workflow-runs:{name}"

    # -- runs --------------------------------------------------------------
    def runs_created(self, queue: str | None = None) -> str:
        """zset: run id -> createdAt ms, all runs (cluster: of one queue)."""
        return self._scoped(queue) + "runs:created"

    def runs_status(self, status: str, queue: str | None = None) -> str:
        """zset: run id -> ms the run entered ``status`` (cluster: of one queue)."""
        if not self.cluster:
            return f"{self._p}runs:status:{status}"
        return f"{self._scoped(queue)}runs:status:{status}"

    def all_runs_status(self, queue: str | None = None) -> list[str]:
        """The six ``runs:status:*`` zsets in :data:`RUN_STATUSES` order."""
        if not self.cluster:
            return self._status
        cached = self._status_by_queue.get(queue or "")
        if cached is None:
            cached = self._status_by_queue[queue or ""] = [self.runs_status(s, queue) for s in RUN_STATUSES]
        return cached

    def run_prefix(self, queue: str | None = None) -> str:
        """What every run key of a queue starts with. Scripts that find a run's id
        inside Redis (the next run of a queue) build its keys from it, as the
        three methods below do: ``run_prefix + id``, ``+ ":steps"``, ``+ ":lease"``
        (``store/lua/start.lua``)."""
        return f"{self._scoped(queue)}run:"

    def run(self, run_id: str, queue: str | None = None) -> str:
        """hash: the run (workflow, queue, status, inputJson, attempt, ...)."""
        return self.run_prefix(queue) + run_id

    def run_steps(self, run_id: str, queue: str | None = None) -> str:
        """hash: step name -> step JSON."""
        return f"{self.run_prefix(queue)}{run_id}:steps"

    def run_lease(self, run_id: str, queue: str | None = None) -> str:
        """string: ``lease_<uuid>`` of the worker executing the run, with PX."""
        return f"{self.run_prefix(queue)}{run_id}:lease"

    def run_children(self, run_id: str, queue: str | None = None) -> str:
        """zset (redflow-gevent extension): child run id -> createdAt ms, the runs
        started with this run as their parent (``parentRunId``); ``queue`` is the
        parent's. Written before the child is enqueued, so it may name a child
        that was never created: readers skip ids without a run hash."""
        return f"{self._scoped(queue)}run:{run_id}:children"

    def run_done(self, run_id: str, queue: str | None = None) -> str:
        """list (redflow-gevent extension): one token pushed when the run ends.

        Waiters block on it (BLMOVE onto itself, so every waiter wakes)
        instead of polling. Other clients neither write nor need it: waiters
        still re-read the run hash, so runs finalized elsewhere are seen by
        a bounded poll.
        """
        return f"{self._scoped(queue)}run:{run_id}:done"

    def run_queues(self) -> str:
        """hash (cluster mode only): run id -> queue, to find a run's slot from its id."""
        return self._p + "run-queues"

    def queues(self) -> str:
        """set (cluster mode only): names of queues that have runs."""
        return self._p + "queues"

    # -- queues ------------------------------------------------------------
    def queue_ready(self, queue: str) -> str:
        """list: run ids ready to claim; producers LPUSH, workers move RIGHT -> LEFT."""
        return f"{self._p}q:{queue}:ready" if not self.cluster else self._scoped(queue) + "ready"

    def queue_processing(self, queue: str) -> str:
        """list: run ids claimed by some worker."""
        return f"{self._p}q:{queue}:processing" if not self.cluster else self._scoped(queue) + "processing"

    def queue_scheduled(self, queue: str) -> str:
        """zset: run id -> availableAt ms (delayed runs and retries)."""
        return f"{self._p}q:{queue}:scheduled" if not self.cluster else self._scoped(queue) + "scheduled"

    # -- idempotency -------------------------------------------------------
    def idempotency(self, workflow: str, key: str, queue: str | None = None) -> str:
        """string: run id for (workflow, idempotency key), with EX ttl (cluster: per queue)."""
        return f"{self._scoped(queue)}idempo:{enc(workflow)}:{enc(key)}"

    # -- cron --------------------------------------------------------------
    def cron_def(self) -> str:
        """hash: cron id -> JSON {id, workflow, queue, expression, timezone, inputJson}."""
        return self._p + "cron:def"

    def cron_next(self) -> str:
        """zset: cron id -> next fire ms."""
        return self._p + "cron:next"

    def lock_cron(self) -> str:
        """string: cron leader token ``cronlock_<uuid>``, PX 2000."""
        return self._p + "lock:cron"

    # -- events ------------------------------------------------------------
    def event_def(self) -> str:
        """hash: event-def id -> JSON {id, event, workflow, queue}."""
        return self._p + "event:def"

    def event_index(self, event: str) -> str:
        """set: event-def ids subscribed to ``event``."""
        return f"{self._p}event:index:{enc(event)}"

    # -- durable waits and fan-out (redflow-gevent extensions) ------------------
    def run_children_ended(self, run_id: str, queue: str | None = None) -> str:
        """set: ids of the run's ``step.run_workflows`` children that have ended
        (each end is reported once, by whoever ended the child); ``queue`` is
        the parent's. Always ``run(run_id, queue) + ":children-ended"``: the
        settle that parks a parent builds it from the run key."""
        return f"{self.run(run_id, queue)}:children-ended"

    def event_waiters(self, event: str) -> str:
        """hash: run id -> JSON of its wait (queue, step, match, the waiting step
        record), for runs parked in ``step.wait_for_event(event)``. Emitting
        ``event`` reads it; an entry goes when its wait ends."""
        return f"{self._p}event:waiters:{enc(event)}"

    def scheduled_events(self) -> str:
        """zset: JSON ``{id, event, payloadJson}`` -> fire ms: events that
        ``schedule_event`` delivers to waiting runs when they fire."""
        return self._p + "events:scheduled"


def new_id(kind: str) -> str:
    """``<kind>_<canonical uuid4>``, the form of run ids and lease tokens.

    Built straight from 16 random bytes: the same string ``uuid.uuid4()``
    gives, at a fraction of its cost (a lease token is made per run)."""
    h = os.urandom(16).hex()
    return f"{kind}_{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_VARIANT = "89ab"


def step_workflow_idempotency_key(parent_run_id: str, step_name: str, child_workflow: str) -> str:
    """Default idempotency key of ``step.run_workflow`` (same as the seed)."""
    return f"stepwf:{enc(parent_run_id)}:{enc(step_name)}:{enc(child_workflow)}"


def step_workflows_idempotency_key(parent_run_id: str, step_name: str, child_workflow: str, index: int) -> str:
    """Idempotency key of child ``index`` of ``step.run_workflows``: the key of
    ``run_workflow`` with the input's index, so a retried parent starts none twice."""
    return f"{step_workflow_idempotency_key(parent_run_id, step_name, child_workflow)}:{index}"


def step_event_idempotency_key(parent_run_id: str, step_name: str, event: str) -> str:
    """Default idempotency key of ``step.emit_event`` / ``step.schedule_event``."""
    return f"stepev:{enc(parent_run_id)}:{enc(step_name)}:{enc(event)}"


def event_run_idempotency_key(event: str, key: str) -> str:
    """Idempotency key of the run an event starts for one subscriber.

    The idempotency key itself is already scoped by workflow; scoping by
    event name too keeps ``emit_event(..., idempotency_key="k")`` apart from
    ``client.run(..., idempotency_key="k")`` of the same workflow.
    """
    return f"event:{enc(event)}:{enc(key)}"


def cron_fire_idempotency_key(cron_id: str, fire_ms: int) -> str:
    """Idempotency key of the run one cron fire starts: one run per fire time,
    even when leadership changes hands mid-fire."""
    return f"cron:{enc(cron_id)}:{fire_ms}"
