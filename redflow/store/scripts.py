"""Every Lua script redflow runs, each with one typed wrapper.

Each multi-key state change that must be atomic is one script, kept in its
own file under ``store/lua/`` with a header (purpose, KEYS, ARGV, returns).
:data:`SCRIPTS` is the one list of them: a script's name and the helper
files (``status``, ``owns``, ``finalize``, ``limits``, ...) it uses. They
run as one Redis Functions library (:mod:`redflow.store.library`: the
helpers are defined once per Redis, not on every call), loaded once per
client and again where Redis lost it; each script touches only the keys its
wrapper builds (or, for a run a script finds itself, keys of the same hash
tag), so Redis Cluster needs changes in ``keys.py`` alone.

Wrappers accept ``conn=``: a worker slot's dedicated connection, ``None``
for the client's pool, or a :class:`~redflow.store.batch.Batch`; then the
call is queued and its parsed reply comes from ``batch.execute()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, TypeVar, cast

from redflow.core.keys import Keys
from redflow.core.retention import FINISHED_STATUSES
from redflow.store.batch import Batch
from redflow.store.library import Library

#: How long the wake-up token of a finished run lives: it only matters to
#: waiters already blocked (they re-read the run at least once a second).
WAKE_TTL_MS = 60 * 1000

#: Helpers of the scripts that claim and start runs (flow control and priorities included).
_CLAIM = ("limits", "priority", "start", "claim")

#: Script name -> the helper files it uses, in :data:`HELPER_ORDER`. The one list of scripts.
SCRIPTS: Mapping[str, tuple[str, ...]] = {
    "enqueue_run": ("priority",),
    "start_run": ("status", "waits", "limits", "start"),
    "take_run": ("status", "waits", *_CLAIM),
    "settle_run": ("status", "finalize", "terminal_index", "waits", *_CLAIM),
    "cancel_run": ("status", "finalize", "terminal_index", "limits"),
    "retry_run": ("status", "terminal_index", "priority"),
    "promote_run": ("priority",),
    "unlock": (),
    "renew_lease": (),
    "claim_inline": (),
    "save_step": ("owns",),
    "confirm_run": ("owns",),
    "purge_invalid_entries": (),
    "reap_run": (),
    "repair_orphan": (),
    "watch_run": (),
    "search_runs": (),
    "purge_run": ("status",),
    "heal_limit": ("status", "limits"),
    "ensure_marker": ("priority",),
    "deliver_event": ("status", "waits"),
    "child_ended": ("status", "waits"),
    "forget_waiters": (),
    "list_child": (),
    "register_waiter": ("clock",),
    "claim_scheduled_events": ("clock",),
    "schedule_event": ("clock",),
}


#: The helper files in the order the library defines them: each after those it uses.
HELPER_ORDER = ("status", "finalize", "terminal_index", "waits", "limits", "priority", "start", "claim", "owns", "clock")

#: Redis Functions flags (a script without flags may write, and a full Redis
#: refuses it before it runs). ``allow-oom`` goes to the scripts whose first
#: write is always a deletion, which a full Redis allowed as EVAL scripts
#: (settling a run, reaping, purging and unlocking go on at ``maxmemory``:
#: docs/guarantees.md, "A full or evicting Redis"), and to those whose only
#: writes are a few bytes that waits and recovery need (``watch_run``'s
#: waiters flag, the entry ``repair_orphan`` and ``ensure_marker`` put back);
#: ``no-writes`` to those that only read.
FLAGS: Mapping[str, tuple[str, ...]] = {
    "settle_run": ("allow-oom",),
    "save_step": ("allow-oom",),
    "confirm_run": ("allow-oom",),
    "claim_inline": ("allow-oom",),
    "promote_run": ("allow-oom",),
    "reap_run": ("allow-oom",),
    "purge_run": ("allow-oom",),
    "purge_invalid_entries": ("allow-oom",),
    "forget_waiters": ("allow-oom",),
    "claim_scheduled_events": ("allow-oom",),
    "heal_limit": ("allow-oom",),
    "unlock": ("allow-oom",),
    "watch_run": ("allow-oom",),
    "repair_orphan": ("allow-oom",),
    "ensure_marker": ("allow-oom",),
    "search_runs": ("no-writes",),
}


@cache
def _lua(name: str) -> str:
    return (resources.files("redflow.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


#: Every script as one library of Redis Functions.
LIBRARY = Library(helpers=HELPER_ORDER, scripts=SCRIPTS, flags=FLAGS, read=_lua)


def script_source(name: str) -> str:
    """The Lua one script runs: its helpers, then its own file (in the library,
    every script shares one definition of each helper)."""
    return "\n".join([*(_lua(helper) for helper in SCRIPTS[name]), _lua(name)])


# -- typed replies -------------------------------------------------------------

T = TypeVar("T")


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2]))


@dataclass(frozen=True, slots=True)
class Enqueued:
    """``enqueue_run``: the run was created, or its idempotency key named ``run_id`` already."""

    created: bool
    run_id: str

    @classmethod
    def parse(cls, reply: Sequence[str]) -> Enqueued:
        return cls(reply[0] == "created", reply[1])


@dataclass(slots=True)  # made per run: not frozen, whose __init__ costs 3x
class StartReply:
    """Starting a claimed run: ``kind`` is ``started`` (with the run's
    ``fields`` as they were read, and ``steps`` when an earlier attempt may
    have stored some), ``busy`` (another attempt holds it), ``missing``,
    ``skip`` (not queued/running: ``status``), ``cancel`` (a cancel is
    pending), ``held`` (a limit holds it back: ``status`` it waits in, and
    ``detail`` the ms it is due, or "") or ``admit`` (its limits are to be
    computed: ``detail`` is its inputJson). ``attempt`` is the attempt number
    the start made."""

    kind: str
    status: str = ""
    workflow: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    steps: dict[str, str] = field(default_factory=dict)
    attempt: int = 0
    detail: str = ""

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> StartReply:
        kind = reply[0]
        if kind == "started":
            return cls(kind, fields=_pairs(reply[1]), steps=_pairs(reply[2]), attempt=int(reply[3]))
        if len(reply) > 2:
            return cls(kind, status=reply[1], workflow=reply[2] or "", detail=reply[3] if len(reply) > 3 else "")
        return cls(kind)


@dataclass(slots=True)  # made per run: not frozen, whose __init__ costs 3x
class Claim:
    """A run a slot claimed and started in the same call (``take_run``, or the
    next run of a ``settle_run``)."""

    run_id: str
    start: StartReply


def _claim(reply: Sequence[Any]) -> Claim | None:
    return Claim(reply[0], StartReply.parse(reply[1])) if reply and reply[0] else None


@dataclass(slots=True)  # made per run: not frozen, whose __init__ costs 3x
class Settled:
    """``settle_run``: the status the run ended in (``scheduled`` for a retry),
    ``stale`` (another attempt owns it) or ``missing``; and the next run it
    claimed and started, if it was asked to and the queue had one."""

    status: str
    next: Claim | None = None

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> Settled:
        return cls(reply[0], _claim(reply[1:]))


@dataclass(frozen=True, slots=True)
class RetryReply:
    """``retry_run``: ``state`` is ``queued`` (a failed/canceled run is queued
    again), ``requeued`` (an unheld running run went back to ready),
    ``not_retryable`` or ``missing``; ``previous`` is the status it had."""

    state: str
    previous: str

    @property
    def accepted(self) -> bool:
        return self.state in ("queued", "requeued")

    @classmethod
    def parse(cls, reply: Sequence[str]) -> RetryReply:
        return cls(reply[0], reply[1])


@dataclass(frozen=True, slots=True)
class StepSaved:
    """``save_step``: ``saved``, ``kept`` (a marker found a newer record),
    ``stale`` (this attempt does not own the run) or ``changed`` (the record
    was not the expected one: ``current`` is what it holds); and the run's
    ``cancelRequestedAt`` ("" when none)."""

    state: str
    cancel_requested_at: str
    current: str = ""

    @classmethod
    def parse(cls, reply: Sequence[str]) -> StepSaved:
        return cls(reply[0], reply[1] or "", reply[2] if len(reply) > 2 else "")


@dataclass(frozen=True, slots=True)
class Ownership:
    """``confirm_run``: whether the attempt still owns its run, and the run's
    status and ``cancelRequestedAt`` ("" when none, or the run is gone)."""

    owned: bool
    status: str
    cancel_requested_at: str

    @property
    def canceled(self) -> bool:
        """Canceled, or asked to be: a cancel request always ends the run canceled."""
        return self.status == "canceled" or self.cancel_requested_at != ""

    @classmethod
    def parse(cls, reply: Sequence[str]) -> Ownership:
        return cls(reply[0] == "owned", reply[1] or "", reply[2] or "")


@dataclass(frozen=True, slots=True)
class SearchStep:
    """``search_runs``: the matches (id, score) newest first, where the walk
    stopped (the last entry it examined), whether it reached the end of the
    index, and how many entries it examined."""

    matches: list[tuple[str, float]]
    last: tuple[str, str] | None
    exhausted: bool
    examined: int

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> SearchStep:
        flat, last_id, last_score = reply[0], reply[1], reply[2]
        matches = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
        last = (str(last_score), str(last_id)) if last_score not in (None, "") else None
        return cls(matches, last, bool(reply[3]), int(reply[4]))


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    """A due scheduled event this worker took: ``member`` (what it removes once
    delivered), its fire time (Redis ms) and its ``P:events:scheduled`` entry."""

    member: str
    fired_at: float
    entry: str


@dataclass(frozen=True, slots=True)
class ScheduledClaim:
    """``claim_scheduled_events``: Redis's time, the score of the first entry
    left (the next fire time or claim end; None when none) and the events taken."""

    now_ms: float
    next_ms: float | None
    events: tuple[ClaimedEvent, ...]

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> ScheduledClaim:
        flat = [str(part) for part in reply]
        events = tuple(ClaimedEvent(flat[i], float(flat[i + 1]), flat[i + 2]) for i in range(2, len(flat), 3))
        return cls(float(flat[0]), float(flat[1]) if flat[1] else None, events)


def _text(reply: Any) -> str:
    return str(reply)


def _flag(reply: Any) -> bool:
    return bool(reply == 1)


def _truthy(reply: Any) -> bool:
    return bool(reply)


def _texts(reply: Any) -> list[str]:
    return [str(entry) for entry in reply]


class Scripts:
    """The scripts registered on one redis-py client, with typed wrappers."""

    def __init__(self, redis: Any, keys: Keys) -> None:
        self.keys = keys
        self._redis = redis
        self._registered = {name: LIBRARY.function(name) for name in SCRIPTS}

    def load_all(self) -> None:
        """Load the library (on every primary of a cluster) before the first
        calls, instead of one "Function not found" per connection on a fresh Redis."""
        LIBRARY.load(self._redis)

    def batch(self) -> Batch:
        """Commands and scripts to send together (see :class:`Batch`)."""
        return Batch(self._redis)

    def _call(self, name: str, keys: Sequence[str], args: Sequence[Any], conn: Any, parse: Callable[[Any], T]) -> T:
        script = self._registered[name]
        if isinstance(conn, Batch):
            conn.run_script(script, keys, args, parse)
            return cast(T, None)  # the parsed reply comes from batch.execute()
        run_script = getattr(conn, "run_script", None)  # a slot's connection
        if run_script is not None:
            return parse(run_script(script, keys, args))
        return parse(script(keys=keys, args=args, client=conn if conn is not None else self._redis))

    def enqueue_run(
        self,
        *,
        run_id: str,
        workflow: str,
        queue: str,
        input_json: str,
        created_at: int,
        available_at: int,
        max_attempts: int,
        idempotency_key: str | None,
        idempotency_ttl_s: int,
        replace_id: str = "",
        parent_run_id: str = "",
        extra_fields: Mapping[str, str] | None = None,
        index_keys: Sequence[str] = (),
        conn: Any = None,
    ) -> Enqueued:
        """``extra_fields``: more fields of the run hash (other clients ignore them);
        ``index_keys``: more indexes the run joins, scored by createdAt (its tags')."""
        k = self.keys
        run_key = k.run(run_id, queue)
        idem_key = k.idempotency(workflow, idempotency_key, queue) if idempotency_key is not None else run_key
        keys = [
            run_key, k.runs_created(queue), k.runs_status("queued", queue), k.runs_status("scheduled", queue),
            k.workflow_runs(workflow, queue), k.queue_ready(queue), k.queue_scheduled(queue), idem_key,
            k.queue_prioritized(queue), k.queue_priority_seq(queue), *index_keys,
        ]  # fmt: skip
        args = [
            run_id, workflow, queue, input_json, created_at, available_at, max_attempts,
            "1" if idempotency_key is not None else "0", idempotency_ttl_s, replace_id, parent_run_id,
        ]  # fmt: skip
        if extra_fields:
            args += [part for pair in extra_fields.items() for part in pair]
        return self._call("enqueue_run", keys, args, conn, Enqueued.parse)

    def start_run(
        self,
        *,
        run_id: str,
        queue: str,
        token: str,
        lease_ms: int,
        now: int,
        limited: str = "",
        limits_json: str = "",
        conn: Any = None,
    ) -> StartReply:
        """Start a run the caller moved into processing itself. ``limited``: the
        worker's workflows with limits (:func:`redflow.engine.limits.limited_names`);
        ``limits_json``: the limits the worker computed for a run handed back
        with ``admit`` ("-" when it has none)."""
        k = self.keys
        keys = [k.queue_processing(queue)]
        args = [run_id, token, lease_ms, now, k.scope(queue), limited, limits_json]
        return self._call("start_run", keys, args, conn, StartReply.parse)

    def take_run(
        self, *, queue: str, token: str, lease_ms: int, now: int, limited: str = "", marker_moved: bool = False, conn: Any = None
    ) -> Claim | None:
        """Claim the next run of ``queue`` and start it; None when nothing was started.
        ``marker_moved``: the caller's BLMOVE took the priority marker (it goes back
        to ready and the best prioritized run is taken instead)."""
        k = self.keys
        keys = [k.queue_ready(queue)]
        args = [token, lease_ms, now, k.scope(queue), k.queue_prefix(queue), limited, "1" if marker_moved else "0"]
        return self._call("take_run", keys, args, conn, _claim)

    def settle_run(
        self,
        *,
        run_id: str,
        queue: str,
        status: str,
        now: int,
        token: str,
        lease_ms: int,
        output_json: str = "",
        error_json: str = "",
        retry_at: int = 0,
        check_lease: bool = True,
        cleanup: bool = True,
        next_token: str = "",
        index_keys: Sequence[str] = (),
        limited: str = "",
        park: Sequence[str] = (),
        conn: Any = None,
    ) -> Settled:
        """Finalize (``status`` terminal), schedule a retry (``status="scheduled"``)
        or park the run in a durable wait (``status="parked"``, ``park`` the
        wait: see ``park_run`` in waits.lua). ``check_lease``: also refuse when
        the lease key is someone else's (the attempt's lease may have lapsed);
        ``cleanup``: delete fields an earlier attempt left (errorJson,
        availableAt); ``next_token``: also claim and start the next run of the
        queue under this lease token; ``index_keys``: the run's failed /
        canceled index pairs (``Keys.terminal_index_keys``); ``limited``: the
        workflows with limits this worker knows (limits.lua)."""
        k = self.keys
        keys = [k.run(run_id, queue), *index_keys]
        args = [
            run_id, status, now, output_json, error_json, token, WAKE_TTL_MS, retry_at, "1" if check_lease else "0",
            "1" if cleanup else "0", next_token, lease_ms, k.scope(queue), k.queue_prefix(queue), limited, *park,
        ]  # fmt: skip
        return self._call("settle_run", keys, args, conn, Settled.parse)

    def cancel_run(
        self, *, run_id: str, queue: str, now: int, reason: str, error_json: str, index_keys: Sequence[str] = (), conn: Any = None
    ) -> str:
        """``canceled`` | ``requested`` | ``terminal`` | ``missing``; ``index_keys`` as for :meth:`settle_run`."""
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.run_done(run_id, queue), k.queue_scheduled(queue),
            k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_prioritized(queue), *index_keys,
        ]  # fmt: skip
        return self._call("cancel_run", keys, [run_id, now, reason, error_json, WAKE_TTL_MS, k.run_prefix(queue)], conn, _text)

    def retry_run(self, *, run_id: str, queue: str, now: int, index_keys: Sequence[str] = (), conn: Any = None) -> RetryReply:
        """``index_keys``: the run's failed / canceled index pairs, which a retried run leaves."""
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.queue_ready(queue), k.run_done(run_id, queue),
            k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_prioritized(queue), k.queue_priority_seq(queue),
            *index_keys,
        ]  # fmt: skip
        return self._call("retry_run", keys, [run_id, now], conn, RetryReply.parse)

    def promote_run(self, *, run_id: str, queue: str, now: int, conn: Any = None) -> str:
        """``promoted`` | ``not_due`` | ``missing`` | ``stale``."""
        k = self.keys
        keys = [
            k.run(run_id, queue), k.queue_scheduled(queue), k.runs_status("scheduled", queue), k.runs_status("queued", queue),
            k.queue_ready(queue), k.queue_prioritized(queue), k.queue_priority_seq(queue),
        ]  # fmt: skip
        return self._call("promote_run", keys, [run_id, now], conn, _text)

    def renew_run_lease(self, *, run_id: str, queue: str, token: str, lease_ms: int, conn: Any = None) -> bool:
        """Whether the run's lease was ours and is renewed."""
        return self._call("renew_lease", [self.keys.run_lease(run_id, queue)], [token, lease_ms], conn, _truthy)

    def release_run_lease(self, *, run_id: str, queue: str, token: str, conn: Any = None) -> bool:
        """Delete the run's lease if it is ours."""
        return self._call("unlock", [self.keys.run_lease(run_id, queue)], [token], conn, _flag)

    def renew_lock(self, *, key: str, token: str, lock_ms: int, conn: Any = None) -> bool:
        """Whether the leader lock ``key`` was ours and is renewed."""
        return self._call("renew_lease", [key], [token, lock_ms], conn, _truthy)

    def release_lock(self, *, key: str, token: str, conn: Any = None) -> bool:
        """Delete the leader lock ``key`` if it is ours."""
        return self._call("unlock", [key], [token], conn, _flag)

    def renew_cron_lock(self, *, token: str, lock_ms: int, conn: Any = None) -> bool:
        """Whether the cron leader lock was ours and is renewed."""
        return self.renew_lock(key=self.keys.lock_cron(), token=token, lock_ms=lock_ms, conn=conn)

    def release_cron_lock(self, *, token: str, conn: Any = None) -> bool:
        return self.release_lock(key=self.keys.lock_cron(), token=token, conn=conn)

    def claim_queued_run_for_inline(self, *, run_id: str, queue: str, conn: Any = None) -> bool:
        k = self.keys
        keys = [k.queue_ready(queue), k.queue_processing(queue), k.run(run_id, queue)]
        return self._call("claim_inline", keys, [run_id], conn, _flag)

    def save_step(
        self,
        *,
        run_id: str,
        queue: str,
        token: str,
        name: str,
        step_json: str,
        lease_ms: int,
        marker_started_at: int | None = None,
        expected: str = "",
        conn: Any = None,
    ) -> StepSaved:
        """``expected``: write only while the step's record is exactly this one."""
        k = self.keys
        keys = [k.run_steps(run_id, queue), k.run_lease(run_id, queue), k.run(run_id, queue)]
        marker = "" if marker_started_at is None else str(marker_started_at)
        return self._call("save_step", keys, [token, name, step_json, marker, lease_ms, expected], conn, StepSaved.parse)

    def confirm_run(self, *, run_id: str, queue: str, token: str, lease_ms: int, conn: Any = None) -> Ownership:
        """Whether the attempt of lease ``token`` still owns the run (and keeps its lease if so)."""
        k = self.keys
        return self._call("confirm_run", [k.run_lease(run_id, queue), k.run(run_id, queue)], [token, lease_ms], conn, Ownership.parse)

    def purge_invalid_entries(self, *, queue: str, conn: Any = None) -> list[str]:
        """Remove processing entries that cannot be run ids; returns them (decoded with U+FFFD)."""
        return self._call("purge_invalid_entries", [self.keys.queue_processing(queue)], [], conn, _texts)

    def reap_run(self, *, run_id: str, queue: str, conn: Any = None) -> bool:
        k = self.keys
        keys = [k.queue_processing(queue), k.queue_ready(queue), k.run_lease(run_id, queue)]
        return self._call("reap_run", keys, [run_id], conn, _flag)

    def repair_orphan(self, *, run_id: str, queue: str, conn: Any = None) -> bool:
        """Whether the running run was in no list and unleased, and is now in ready."""
        k = self.keys
        keys = [k.run(run_id, queue), k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_ready(queue)]
        return self._call("repair_orphan", keys, [run_id], conn, _flag)

    def watch_run(self, *, run_id: str, queue: str | None, conn: Any = None) -> list[str | None]:
        """``[status, outputJson, errorJson, cancelReason, queue]`` of the run, flagging
        an unfinished one as waited for (its finisher then pushes the wake-up token)."""
        return self._call("watch_run", [self.keys.run(run_id, queue)], [], conn, list)

    def search_runs(
        self,
        *,
        walk: str,
        probes: Sequence[str],
        after: tuple[str, str] | None,
        wanted: int,
        skip_budget: int,
        batch: int,
        conn: Any = None,
    ) -> SearchStep:
        """One bounded step of a filtered listing (see ``store/lua/search_runs.lua``):
        walk index ``walk`` after the cursor ``after`` = (score, id), keeping runs in every ``probes`` index."""
        score, run_id = after if after is not None else ("", "")
        args = [score, run_id, wanted, skip_budget, batch]
        return self._call("search_runs", [walk, *probes], args, None, SearchStep.parse)

    # -- purging finished runs (retention, client.purge) ----------------------
    def purge_run(
        self,
        *,
        run_id: str,
        queue: str | None,
        workflow: str,
        tags: Mapping[str, str] | None = None,
        status: str = "",
        finished_at: str = "",
        conn: Any = None,
    ) -> str:
        """Delete a finished run and every index entry naming it, if it is still
        the run the caller saw (``status``, ``finished_at``: as read; "" for
        unknown): ``purged`` | ``missing`` | ``live`` | ``changed``
        (``queue``: the run's queue; only cluster mode needs it)."""
        own = run_own_keys(self.keys, run_id, queue)
        keys = [*own, *run_index_keys(self.keys, queue, workflow, status, tags or {})]
        return self._call("purge_run", keys, [run_id, len(own), finished_at, workflow, status], conn, _text)

    def heal_limit(self, *, held_key: str, queue: str | None, conn: Any = None) -> int:
        """Count the units of the concurrency limit whose held list is ``held_key``
        again, and move as many held runs back to ready as units are free (how many)."""
        k = self.keys
        keys = [k.limits_held_index(queue), k.runs_status("running", queue)]
        return self._call("heal_limit", keys, [held_key, k.run_prefix(queue)], conn, int)

    def ensure_marker(self, *, queue: str, conn: Any = None) -> bool:
        """Whether ``queue`` had prioritized runs but no marker, and got one."""
        k = self.keys
        keys = [k.queue_ready(queue), k.queue_processing(queue), k.queue_prioritized(queue)]
        return self._call("ensure_marker", keys, [], conn, _flag)

    # -- durable waits and fan-out ---------------------------------------------------
    def deliver_event(self, *, run_id: str, queue: str, step: str, waiting: str, resolved: str, now: int, conn: Any = None) -> str:
        """``resumed`` | ``delivered`` | ``done`` | ``pending`` | ``gone`` (see deliver_event.lua)."""
        k = self.keys
        keys = [k.run(run_id, queue), *k.all_runs_status(queue), k.run_steps(run_id, queue), k.queue_scheduled(queue), k.queue_ready(queue)]
        return self._call("deliver_event", keys, [run_id, step, waiting, resolved, now], conn, _text)

    def child_ended(self, *, child_id: str, parent_id: str, parent_queue: str, now: int, conn: Any = None) -> str:
        """``resumed`` | ``waiting`` | ``noted`` | ``seen`` | ``gone`` (see child_ended.lua)."""
        k = self.keys
        keys = [
            k.run(parent_id, parent_queue), *k.all_runs_status(parent_queue), k.run_children_ended(parent_id, parent_queue),
            k.queue_scheduled(parent_queue), k.queue_ready(parent_queue),
        ]  # fmt: skip
        return self._call("child_ended", keys, [child_id, parent_id, now], conn, _text)

    def list_child(self, *, children_key: str, child_id: str, now: int, conn: Any = None) -> bool:
        """List ``child_id`` in a parent's children index (``Keys.run_children``),
        if the parent run exists (see list_child.lua)."""
        keys = [self.keys.run_of_children(children_key), children_key]
        return self._call("list_child", keys, [child_id, now], conn, _flag)

    def forget_waiters(self, *, event: str, entries: Sequence[tuple[str, str]], conn: Any = None) -> int:
        """Drop ``(run id, entry or head)`` pairs of ``event``'s waiter index that still hold that entry (or that wait)."""
        return self._call("forget_waiters", [self.keys.event_waiters(event)], [part for pair in entries for part in pair], conn, int)

    def register_waiter(self, *, event: str, run_id: str, head: str, conn: Any = None) -> bool:
        """Put a run's wait (its entry's ``head``) in ``event``'s waiter index, stamped
        with Redis's time; False if that same wait's entry was there (its stamp kept)."""
        return self._call("register_waiter", [self.keys.event_waiters(event)], [run_id, head], conn, _flag)

    def schedule_event(self, *, entry: str, at_ms: int, conn: Any = None) -> float:
        """Store a scheduled event (its ``P:events:scheduled`` member) to fire at
        ``at_ms``, or now by Redis's clock if that is past; returns its fire time."""
        return self._call("schedule_event", [self.keys.scheduled_events()], [entry, at_ms], conn, float)

    def claim_scheduled_events(self, *, most: int, claim_ms: int, conn: Any = None) -> ScheduledClaim:
        """Take up to ``most`` due scheduled events (or ones whose claim ended) for ``claim_ms``."""
        return self._call("claim_scheduled_events", [self.keys.scheduled_events()], [most, claim_ms], conn, ScheduledClaim.parse)


def run_own_keys(keys: Keys, run_id: str, queue: str | None) -> list[str]:
    """Every key that belongs to one run alone, the run hash first: deleted with the run."""
    return [
        keys.run(run_id, queue),
        keys.run_steps(run_id, queue),
        keys.run_lease(run_id, queue),
        keys.run_done(run_id, queue),
        keys.run_children(run_id, queue),
        keys.run_children_ended(run_id, queue),
    ]


def run_index_keys(keys: Keys, queue: str | None, workflow: str, status: str = "", tags: Mapping[str, str] | None = None) -> list[str]:
    """Every index (zset) that may name a finished run: its entry goes with the
    run (the index of its ``status`` only, when that is known: a run that
    changed status since is not deleted). A new index of runs is one more line here."""
    statuses = (status,) if status in FINISHED_STATUSES else FINISHED_STATUSES
    indexes = [keys.runs_created(queue), *(keys.runs_status(each, queue) for each in statuses), keys.retention_held(queue)]
    if workflow:
        indexes.append(keys.workflow_runs(workflow, queue))
    # the search indexes: per tag, per workflow and tag, and of failed / canceled runs
    indexes += keys.run_index_keys(workflow, tags or {}, queue)
    return indexes
