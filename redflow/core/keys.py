"""Every Redis key redflow uses, in one place (DATA_MODEL.md).

The layout is shared with the TypeScript ``@redflow/client`` and the asyncio
``redflow`` package, so a run written by either is read here and the other
way round. ``P`` below is the prefix (default ``redflow:v1``); keys are
``P + ":" + rest`` with a trailing colon on ``P`` ignored. Composite parts
are length-prefixed with :func:`enc` so that ``a:b`` + ``c`` and ``a`` +
``b:c`` never collide. No I/O here: this module only spells names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from redflow.core.errors import RedflowError

DEFAULT_PREFIX: Final = "redflow:v1"

RUN_STATUSES: Final = ("scheduled", "queued", "running", "succeeded", "failed", "canceled")
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})
_CHILDREN: Final = ":children"


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

    __slots__ = ("prefix", "cluster", "_p", "_status", "_status_by_queue", "_terminal", "_schedules")

    def __init__(self, prefix: str = DEFAULT_PREFIX, *, cluster: bool = False) -> None:
        self.prefix = prefix.rstrip(":") or DEFAULT_PREFIX
        self.cluster = cluster
        self._p = self.prefix + ":"
        self._status = [f"{self._p}runs:status:{s}" for s in RUN_STATUSES]
        self._status_by_queue: dict[str, list[str]] = {}
        self._terminal: dict[tuple[str, str | None], list[str]] = {}
        self._schedules = self._p + ("{schedules}" if cluster else "schedules")  # one hash tag for them all on a cluster

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

    def cancel_notices(self, queue: str | None = None) -> str:
        """zset (extension): run id -> ms its cancel was asked while it ran (cluster: per queue), read by
        lease keepers once a tick; entries and the key go a minute after (cancel_run.lua)."""
        return self._scoped(queue) + "cancel-notices"

    def run_children(self, run_id: str, queue: str | None = None) -> str:
        """zset (redflow-gevent extension): child run id -> createdAt ms, the runs
        started with this run as their parent (``parentRunId``); ``queue`` is the
        parent's. Written before the child is enqueued, so it may name a child
        that was never created: readers skip ids without a run hash. Always
        ``run(run_id, queue) + ":children"`` (see :meth:`run_of_children`)."""
        return f"{self.run(run_id, queue)}{_CHILDREN}"

    @staticmethod
    def run_of_children(children_key: str) -> str:
        """The run key of the parent whose :meth:`run_children` index is ``children_key``."""
        if not children_key.endswith(_CHILDREN):
            raise RedflowError(f"not a children index: {children_key!r}")
        return children_key.removesuffix(_CHILDREN)

    def run_done(self, run_id: str, queue: str | None = None) -> str:
        """list (redflow-gevent extension): one token pushed when the run ends. Waiters block
        on it (BLMOVE onto itself, so every waiter wakes) instead of polling. Other clients neither
        write nor need it: waiters still re-read the run hash (runs finalized elsewhere: a bounded poll)."""
        return f"{self._scoped(queue)}run:{run_id}:done"

    def run_blobs(self, run_id: str, queue: str | None = None) -> str:
        """hash (the asyncio package's, 0.0.12 and later): blob field ``v1:<sha1>`` ->
        a large JSON payload of the run, plain or ``@gzip:b64:``; the run's fields
        hold ``@blob:v1:<sha1>`` references to them (redflow/core/blobs.py)."""
        return f"{self.run(run_id, queue)}:blobs"

    def run_terminal(self, run_id: str, queue: str | None = None) -> str:
        """stream (the asyncio package's, 0.1.2 and later): one entry ``{status,
        finishedAt}`` (MAXLEN ~1) added when the run ends; its clients'
        ``handle.result()`` block on it (XREAD from ``0-0``)."""
        return f"{self.run(run_id, queue)}:terminal"

    def run_stream(self, run_id: str, queue: str | None = None, pass_number: int = 1) -> str:
        """stream (the asyncio package's output stream of one execution pass, 0.1.7 and
        later): entries ``record`` = an item (core/models/streams.py). Every attempt of a
        redflow-gevent run writes pass 1, trimmed to ``core.streams.MAX_ITEMS``; passes
        2.. are only written by asyncio workers. Always ``run(run_id, queue) + ":stream:pass:<n>"``."""
        return f"{self.run(run_id, queue)}:stream:pass:{pass_number}"

    def run_stream_signal(self, run_id: str, queue: str | None = None) -> str:
        """stream (the asyncio package's): entries ``record`` = a signal; the script that
        ends a run whose stream is written or read adds ``reason: terminal`` (finalize.lua)."""
        return f"{self.run(run_id, queue)}:stream:signal"

    def run_stream_cursors(self, run_id: str, queue: str | None = None) -> str:
        """hash (the asyncio package's): its resumable readers' cursors; deleted with the run."""
        return f"{self.run(run_id, queue)}:stream:cursors"

    def run_queues(self) -> str:
        """hash (cluster mode only): run id -> queue, to find a run's slot from its id."""
        return self._p + "run-queues"

    def queues(self) -> str:
        """set (cluster mode only): names of queues that have runs."""
        return self._p + "queues"

    # -- queues ------------------------------------------------------------
    def queue_prefix(self, queue: str) -> str:
        """What the keys of one queue start with (``P:q:<queue>:``, or the
        queue's scope in cluster mode). The scripts of the hot path take it
        instead of four keys and add the suffixes the methods below add:
        ``ready``, ``processing``, ``scheduled``, ``prioritized`` (store/lua/claim.lua)."""
        return f"{self._p}q:{queue}:" if not self.cluster else self._scoped(queue)

    def queue_ready(self, queue: str) -> str:
        """list: run ids ready to claim; producers LPUSH, workers move RIGHT -> LEFT."""
        return self.queue_prefix(queue) + "ready"

    def queue_processing(self, queue: str) -> str:
        """list: run ids claimed by some worker."""
        return self.queue_prefix(queue) + "processing"

    def queue_scheduled(self, queue: str) -> str:
        """zset: run id -> availableAt ms (delayed runs and retries)."""
        return self.queue_prefix(queue) + "scheduled"

    # -- workers and charts (redflow-gevent extensions) ----------------------
    def workers(self) -> str:
        """zset: worker id -> ms of its last heartbeat (every heartbeat prunes members older than a record lives)."""
        return self._p + "workers"

    def worker(self, worker_id: str) -> str:
        """string: one worker's heartbeat record (JSON, ``WorkerRecord``), with PX; deleted by a graceful stop."""
        return f"{self._p}worker:{worker_id}"

    def stats_bucket(self, span_s: int, start_ms: int) -> str:
        """hash: what workers tallied in one time bucket of ``span_s`` seconds
        starting at ``start_ms`` (queue depth samples, enqueue-to-start and
        attempt-duration histograms per workflow; fields spelled in
        ``core/tally.py``); expires a while after the bucket ends."""
        return f"{self._p}stats:{span_s}:{start_ms}"

    def queue_prioritized(self, queue: str) -> str:
        """zset (redflow-gevent extension): run ids enqueued with a priority > 0 ->
        (10 - priority) * 2**40 + enqueue sequence; a marker entry in ready stands for them."""
        return self.queue_prefix(queue) + "prioritized"

    def queue_priority_seq(self, queue: str) -> str:
        """string (redflow-gevent extension): the enqueue sequence of prioritized runs (INCR)."""
        return self.queue_prefix(queue) + "priority-seq"

    # -- flow control (redflow-gevent extension but the first, the asyncio package's) --
    # Run keys and these meet in the start and settle scripts, so in cluster mode
    # they carry the run's queue tag: a limit then counts the runs of one queue.
    def scope(self, queue: str | None = None) -> str:
        """What every key of ``queue``'s runs starts with (``P:``, or ``P:{q:<queue>}:`` in cluster mode).
        Scripts that take it build the run keys (``scope .. "run:" .. id``, see
        :meth:`run_prefix`) and the status indexes (``scope .. "runs:status:" ..
        status``, see :meth:`runs_status`) from it (store/lua/status.lua)."""
        return self._scoped(queue)

    def workflow_running(self, name: str, queue: str | None = None) -> str:
        """string: how many runs of workflow ``name`` are running, the counter of the
        asyncio ``redflow`` package (its ``max_concurrency``): a workflow-wide
        ``Concurrency`` counts there, so that both workers respect one limit."""
        return f"{self._scoped(queue)}workflow-running:{name}"

    def _limit(self, workflow: str, index: int | None, value: str | None, queue: str | None) -> str:
        base = f"{self._scoped(queue)}limit:{enc(workflow)}"
        return base if index is None else f"{base}:{index}:{enc(value or '')}"

    def limit_units(self, workflow: str, index: int, value: str, queue: str | None = None) -> str:
        """set: ids of the running runs holding a unit of the keyed limit number
        ``index`` of ``workflow`` for key value ``value``."""
        return self._limit(workflow, index, value, queue) + ":running"

    def limit_held(self, workflow: str, index: int | None = None, value: str | None = None, queue: str | None = None) -> str:
        """list: ids of runs waiting (queued) for a unit of one concurrency limit of
        ``workflow`` (the workflow-wide one without ``index``), first held first."""
        return self._limit(workflow, index, value, queue) + ":held"

    def limit_waiting(self, workflow: str, queue: str | None = None) -> str:
        """set: ids of the runs of ``workflow`` held by any of its limits (what views count)."""
        return self._limit(workflow, None, None, queue) + ":waiting"

    def limits_held_index(self, queue: str | None = None) -> str:
        """hash: held list key -> JSON of its limit, for every limit with held runs
        (the sweeper's work list: it re-counts their units and wakes held runs)."""
        return self._scoped(queue) + "limits:held"

    def rate_window(self, workflow: str, value: str | None, queue: str | None = None) -> str:
        """zset: ``<run id>:<attempt>`` -> ms of each start within the rate limit's
        period (a sliding log); ``+ ":next"``: the due time of the last run it held."""
        base = f"{self._scoped(queue)}rate:{enc(workflow)}"
        return base if value is None else f"{base}:{enc(value)}"

    def lock_limits(self, queue: str | None = None) -> str:
        """string: held by the worker whose sweeper heals the limits of this scope now."""
        return self._scoped(queue) + "lock:limits"

    # -- idempotency, singleton and debounce (cluster: per queue, beside the run they name) --
    def idempotency(self, workflow: str, key: str, queue: str | None = None) -> str:
        """string: run id for (workflow, idempotency key), with EX ttl."""
        return f"{self._scoped(queue)}idempo:{enc(workflow)}:{enc(key)}"

    def singleton(self, workflow: str, key: str, queue: str | None = None) -> str:
        """string: id of the unfinished run holding ``workflow``'s singleton key ``key`` (core/singleton.py)."""
        return f"{self._scoped(queue)}singleton:{enc(workflow)}:{enc(key)}"

    def debounce(self, workflow: str, key: str, queue: str | None = None) -> str:
        """string: id of the still scheduled run that ``workflow``'s calls with debounce key ``key`` collapse into."""
        return f"{self._scoped(queue)}debounce:{enc(workflow)}:{enc(key)}"

    def one_run_calls(self, queue: str | None = None) -> str:
        """hash: ``<workflow>:skipped`` / ``:collapsed`` -> calls a singleton skipped or a debounce collapsed (metrics)."""
        return self._scoped(queue) + "one-run-calls"

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

    # -- schedules as data (an extension; its scripts touch a schedule's hash and both indexes) --
    def schedules(self) -> str:
        """zset: schedule id -> ms it was created (every schedule, paused ones too)."""
        return self._schedules + ":ids"

    def schedules_next(self) -> str:
        """zset: schedule id -> due ms of its next tick (tick time + its jitter); paused ones are absent."""
        return self._schedules + ":next"

    def schedule(self, schedule_id: str) -> str:
        """hash: one schedule, its definition and its state (fields: ``ScheduleField``)."""
        return f"{self._schedules}:def:{schedule_id}"

    # -- events ------------------------------------------------------------
    def event_def(self) -> str:
        """hash: event-def id -> JSON {id, event, workflow, queue}."""
        return self._p + "event:def"

    def event_index(self, event: str) -> str:
        """set: event-def ids subscribed to ``event``."""
        return f"{self._p}event:index:{enc(event)}"

    # -- run search indexes (redflow-gevent extension, issue 18) --------------
    # Written off the hot path only: tag indexes at enqueue (tagged runs only),
    # the failed / canceled ones where a run turns failed or canceled, and
    # removed by a manual retry. A run's entries are listed by run_index_keys.
    def tag(self, key: str, value: str, queue: str | None = None) -> str:
        """zset: run id -> createdAt ms, runs tagged ``key=value`` (cluster: of one queue)."""
        return f"{self._scoped(queue)}tag:{enc(key)}:{enc(value)}"

    def workflow_tag(self, workflow: str, key: str, value: str, queue: str | None = None) -> str:
        """zset: run id -> createdAt ms, runs of ``workflow`` tagged ``key=value``."""
        return f"{self._scoped(queue)}workflow-tag:{enc(workflow)}:{enc(key)}:{enc(value)}"

    def workflow_status(self, status: str, workflow: str, queue: str | None = None) -> str:
        """zset: run id -> ms it entered ``status``, for ``failed`` and ``canceled`` runs of ``workflow``."""
        return f"{self._scoped(queue)}workflow-status:{status}:{workflow}"

    def tag_status(self, status: str, key: str, value: str, queue: str | None = None) -> str:
        """zset: run id -> ms it entered ``status``, for ``failed`` and ``canceled`` runs tagged ``key=value``."""
        return f"{self._scoped(queue)}tag-status:{status}:{enc(key)}:{enc(value)}"

    def tag_index_keys(self, workflow: str, tags: Mapping[str, str], queue: str | None = None) -> list[str]:
        """The indexes enqueue adds a tagged run to (score createdAt): per tag, and per workflow and tag."""
        out = [self.tag(k, v, queue) for k, v in tags.items()]
        out += [self.workflow_tag(workflow, k, v, queue) for k, v in tags.items()]
        return out

    def terminal_index_keys(self, workflow: str, tags: Mapping[str, str], queue: str | None = None) -> list[str]:
        """The failed / canceled indexes of one run, in pairs (failed key, canceled key):
        per workflow, then per tag. Scripts that end or retry a run take them as trailing KEYS."""
        if not tags:  # asked per settle: cached for untagged runs
            cached = self._terminal.get((workflow, queue))
            if cached is None:
                if len(self._terminal) > 10_000:
                    self._terminal.clear()
                cached = self._terminal[(workflow, queue)] = self._terminal_keys(workflow, tags, queue)
            return cached
        return self._terminal_keys(workflow, tags, queue)

    def _terminal_keys(self, workflow: str, tags: Mapping[str, str], queue: str | None) -> list[str]:
        out: list[str] = []
        if workflow:
            out += [self.workflow_status("failed", workflow, queue), self.workflow_status("canceled", workflow, queue)]
        for k, v in tags.items():
            out += [self.tag_status("failed", k, v, queue), self.tag_status("canceled", k, v, queue)]
        return out

    def run_index_keys(self, workflow: str, tags: Mapping[str, str], queue: str | None = None) -> list[str]:
        """Every index of this extension that may name a run: what deleting the run must clean."""
        return self.tag_index_keys(workflow, tags, queue) + self.terminal_index_keys(workflow, tags, queue)

    def cron_paused(self) -> str:
        """hash: cron id -> ms it was paused (``cron pause``); a paused trigger has no ``cron:next`` entry."""
        return self._p + "cron:paused"

    # -- retention (redflow-gevent extension) ------------------------------
    def lock_retention(self) -> str:
        """string: token of the worker whose retention cleaner runs now, with PX."""
        return self._p + "lock:retention"

    def retention_cursors(self) -> str:
        """hash: the retention cleaner's place in each terminal status index,
        per (queue, status, retention ms): JSON ``{score, member, kept, workflows}``."""
        return self._p + "retention:cursors"

    def retention_cap_cursors(self) -> str:
        """hash: the retention cleaner's place in each capped workflow's
        ``workflow-runs`` index (``max_finished``), per ``enc(queue) + workflow``:
        JSON ``{score, member, kept}``."""
        return self._p + "retention:cap-cursors"

    def retention_held(self, queue: str | None = None) -> str:
        """zset: run id -> ms of its next look, for finished children whose
        retention has passed but whose parent was unfinished when the cleaner
        reached them (it keeps them until the parent ends; cluster: per the child's queue)."""
        return self._scoped(queue) + "retention:held"

    # -- durable waits and fan-out (redflow-gevent extensions) ------------------
    def run_children_ended(self, run_id: str, queue: str | None = None) -> str:
        """set: ids of the run's ``step.run_workflows`` children that have ended
        (each end is reported once, by whoever ended the child); ``queue`` is
        the parent's. Always ``run(run_id, queue) + ":children-ended"``: the
        settle that parks a parent builds it from the run key."""
        return f"{self.run(run_id, queue)}:children-ended"

    def run_signals(self, run_id: str, queue: str | None = None) -> str:
        """hash: the signals sent to the run and not taken yet, a queue per signal
        name (``t:<name>``: how many were sent, ``h:<name>``: taken, ``<n>:<name>``:
        the n-th one's payload JSON; ``n``: how many wait in all), deleted when
        none is left (store/lua/send_signal.lua). Always ``run(run_id, queue) + ":signals"``:
        the settle that parks a run in ``step.wait_for_signal`` builds it from the run key."""
        return f"{self.run(run_id, queue)}:signals"

    def event_waiters(self, event: str) -> str:
        """hash: run id -> JSON of its wait (queue, step, match, the waiting step
        record, since: when the entry was first written, Redis ms), for runs
        parked in ``step.wait_for_event(event)``. Emitting ``event`` reads
        it; an entry goes when its wait ends."""
        return f"{self._p}event:waiters:{enc(event)}"

    def scheduled_events(self) -> str:
        """zset: JSON ``{id, event, payloadJson}`` -> fire ms: events that
        ``schedule_event`` delivers to waiting runs when they fire; one a
        worker is delivering is ``claimed:<fire ms>:<claim end ms>:<that JSON>``
        -> its fire ms (claim_scheduled_events.lua)."""
        return self._p + "events:scheduled"


def new_id(kind: str) -> str:
    """``<kind>_<canonical uuid4>``, the form of run ids and lease tokens.

    Built straight from 16 random bytes: the same string ``uuid.uuid4()``
    gives, at a fraction of its cost (a lease token is made per run)."""
    h = os.urandom(16).hex()
    return f"{kind}_{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_VARIANT = "89ab"
