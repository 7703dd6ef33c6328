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

DEFAULT_PREFIX: Final = "redflow:v1"

RUN_STATUSES: Final = ("scheduled", "queued", "running", "succeeded", "failed", "canceled")
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})


def enc(value: str) -> str:
    """Length-prefix one composite part: ``enc("ab") == "2:ab"``."""
    return f"{len(value)}:{value}"


class Keys:
    """Key builder for one prefix. Each method documents the Redis type it names."""

    __slots__ = ("prefix", "_p", "_status")

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix.rstrip(":") or DEFAULT_PREFIX
        self._p = self.prefix + ":"
        self._status = [self.runs_status(s) for s in RUN_STATUSES]

    def __repr__(self) -> str:
        return f"Keys({self.prefix!r})"

    # -- workflows ---------------------------------------------------------
    def workflows(self) -> str:
        """set: names of synced workflows."""
        return self._p + "workflows"

    def workflow(self, name: str) -> str:
        """hash: workflow metadata (name, queue, maxAttempts, updatedAt, cronJson, ...)."""
        return f"{self._p}workflow:{name}"

    def workflow_runs(self, name: str) -> str:
        """zset: run id -> createdAt ms, runs of one workflow."""
        return f"{self._p}workflow-runs:{name}"

    # -- runs --------------------------------------------------------------
    def runs_created(self) -> str:
        """zset: run id -> createdAt ms, all runs."""
        return self._p + "runs:created"

    def runs_status(self, status: str) -> str:
        """zset: run id -> ms the run entered ``status``."""
        return f"{self._p}runs:status:{status}"

    def all_runs_status(self) -> list[str]:
        """The six ``runs:status:*`` zsets in :data:`RUN_STATUSES` order."""
        return self._status

    def run_prefix(self) -> str:
        """Prefix of run hashes: ``run_key == run_prefix() + run_id``."""
        return self._p + "run:"

    def run(self, run_id: str) -> str:
        """hash: the run (workflow, queue, status, inputJson, attempt, ...)."""
        return f"{self._p}run:{run_id}"

    def run_steps(self, run_id: str) -> str:
        """hash: step name -> step JSON."""
        return f"{self._p}run:{run_id}:steps"

    def run_lease(self, run_id: str) -> str:
        """string: ``lease_<uuid>`` of the worker executing the run, with PX."""
        return f"{self._p}run:{run_id}:lease"

    def run_done(self, run_id: str) -> str:
        """list (redflow-gevent extension): one token pushed when the run ends.

        Waiters block on it (BLMOVE onto itself, so every waiter wakes)
        instead of polling. Other clients neither write nor need it: waiters
        still re-read the run hash, so runs finalized elsewhere are seen by
        a bounded poll.
        """
        return f"{self._p}run:{run_id}:done"

    # -- queues ------------------------------------------------------------
    def queue_ready(self, queue: str) -> str:
        """list: run ids ready to claim; producers LPUSH, workers move RIGHT -> LEFT."""
        return f"{self._p}q:{queue}:ready"

    def queue_processing(self, queue: str) -> str:
        """list: run ids claimed by some worker."""
        return f"{self._p}q:{queue}:processing"

    def queue_scheduled(self, queue: str) -> str:
        """zset: run id -> availableAt ms (delayed runs and retries)."""
        return f"{self._p}q:{queue}:scheduled"

    # -- idempotency -------------------------------------------------------
    def idempotency(self, workflow: str, key: str) -> str:
        """string: run id for (workflow, idempotency key), with EX ttl."""
        return f"{self._p}idempo:{enc(workflow)}:{enc(key)}"

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
