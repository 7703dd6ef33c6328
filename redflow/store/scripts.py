"""Every Lua script redflow runs (``store/catalog.py``), each with one typed wrapper.

A wrapper builds its script's KEYS and ARGV, in the order the script's
header and ``local`` lines read them (``tests/test_script_args.py`` checks
every one), from plain arguments or, for the state changes with many
options, from a request value (``store/requests.py``); its reply comes back
parsed (``store/replies.py``). Each script touches only the keys its
wrapper builds (or, for a run a script finds itself, keys of the same hash
tag), so Redis Cluster needs changes in ``keys.py`` alone.

Wrappers accept ``conn=``: a worker slot's dedicated connection, ``None``
for the client's pool, or a :class:`~redflow.store.batch.Batch`; then the
call is queued and its parsed reply comes from ``batch.execute()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

from redflow.core.keys import Keys
from redflow.core.retention import FINISHED_STATUSES
from redflow.store.batch import Batch
from redflow.store.catalog import LIBRARY, SCRIPTS
from redflow.store.library import LibraryFunction
from redflow.store.replies import (
    Claim,
    Enqueued,
    Ownership,
    RetryReply,
    ScheduledClaim,
    SearchStep,
    Settled,
    StartReply,
    StepSaved,
    StreamAppend,
    StreamPage,
    claim_of,
    flag,
    text,
    texts,
    truthy,
)
from redflow.store.requests import EnqueueRequest, SettleRequest, SignalTake, StartRequest, StepRecord, TickDone, records_args

T = TypeVar("T")

#: How long the wake-up token of a finished run lives: it only matters to
#: waiters already blocked (they re-read the run at least once a second).
WAKE_TTL_MS = 60 * 1000


class ScriptConnection(Protocol):
    """A worker slot's connection (``store/slot_connection.py``, ``mux_connection.py``):
    it runs a function of the library itself, loading the library where Redis lost it."""

    def run_script(self, script: LibraryFunction, keys: Sequence[Any], args: Sequence[Any]) -> Any: ...


class CommandSender(Protocol):
    """A connection that sends a command without waiting for it (``MuxConnection.send``)."""

    def send(self, args: Sequence[Any], on_reply: Callable[[Any], object]) -> None: ...


#: Where a wrapper sends its call: a slot's connection, a batch (the parsed reply
#: comes from ``batch.execute()``), or None for the client's pool.
Conn = Batch | ScriptConnection | None


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

    def _call(self, name: str, keys: Sequence[str], args: Sequence[Any], conn: Conn, parse: Callable[[Any], T]) -> T:
        script = self._registered[name]
        if isinstance(conn, Batch):
            conn.run_script(script, keys, args, parse)
            return cast(T, None)  # the parsed reply comes from batch.execute()
        if conn is not None:  # a slot's connection
            return parse(conn.run_script(script, keys, args))
        return parse(script(keys=keys, args=args, client=self._redis))

    def enqueue_run(self, request: EnqueueRequest, *, run_id: str, created_at_ms: int, replace_id: str = "", conn: Conn = None) -> Enqueued:
        """Create run ``run_id`` (``replace_id``: the run its idempotency key may be
        taken from: failed, canceled or gone). Fields beyond DATA_MODEL.md's go
        into the hash too (other clients ignore them); its tags' indexes name it."""
        k, queue, workflow, claim = self.keys, request.queue, request.workflow, request.claim
        run_key = k.run(run_id, queue)
        idempotent = request.idempotency_key is not None
        keys = [
            run_key, k.runs_created(queue), k.runs_status("queued", queue), k.runs_status("scheduled", queue),
            k.workflow_runs(workflow, queue), k.queue_ready(queue), k.queue_scheduled(queue),
            k.idempotency(workflow, request.idempotency_key, queue) if request.idempotency_key is not None else run_key,
            k.queue_prioritized(queue), k.queue_priority_seq(queue), claim.redis_key if claim is not None else run_key,
            k.one_run_calls(queue),
            *(k.tag_index_keys(workflow, request.tags, queue) if request.tags else ()),
        ]  # fmt: skip
        args: list[Any] = [
            run_id, workflow, queue, request.input_json, created_at_ms, request.due_ms(created_at_ms), request.max_attempts,
            "1" if idempotent else "0", request.idempotency_ttl_s, replace_id, request.parent_run_id, *(request.input_blob or ("", "")),
            *((claim.mode, request.replace_from, claim.period_ms, claim.max_wait_ms) if claim is not None else ("", "", 0, 0)),
        ]  # fmt: skip
        args += [part for pair in request.hash_fields(created_at_ms).items() for part in pair]
        return self._call("enqueue_run", keys, args, conn, Enqueued.parse)

    def start_run(self, request: StartRequest, *, conn: Conn = None) -> StartReply:
        """Start a run the caller moved into processing itself (see :class:`StartRequest`)."""
        k, r = self.keys, request
        args = [r.run_id, r.token, r.lease_ms, r.now_ms, k.scope(r.queue), r.limited, r.limits_json]
        return self._call("start_run", [k.queue_processing(r.queue)], args, conn, StartReply.parse)

    def take_run(
        self, *, queue: str, token: str, lease_ms: int, now_ms: int, limited: str = "", marker_moved: bool = False, conn: Conn = None
    ) -> Claim | None:
        """Claim the next run of ``queue`` and start it; None when nothing was started.
        ``marker_moved``: the caller's BLMOVE took the priority marker (it goes back
        to ready and the best prioritized run is taken instead)."""
        k = self.keys
        keys = [k.queue_ready(queue)]
        args = [token, lease_ms, now_ms, k.scope(queue), k.queue_prefix(queue), limited, "1" if marker_moved else "0"]
        return self._call("take_run", keys, args, conn, claim_of)

    def settle_run(self, request: SettleRequest, *, conn: Conn = None) -> Settled:
        """Finalize the run, schedule its retry or park it (see :class:`SettleRequest`)."""
        k, r = self.keys, request
        keys = [k.run(r.run_id, r.queue), *r.index_keys]
        args = [
            r.run_id, r.status, r.now_ms, r.output_json, r.error_json, r.token, WAKE_TTL_MS, r.retry_at_ms,
            "1" if r.check_lease else "0", "1" if r.cleanup else "0", r.next_token, r.lease_ms, k.scope(r.queue),
            k.queue_prefix(r.queue), r.limited, *(r.blob or ("", "")), len(r.steps), *records_args(r.steps), *r.park,
        ]  # fmt: skip
        return self._call("settle_run", keys, args, conn, Settled.parse)

    def cancel_run(
        self, *, run_id: str, queue: str, now_ms: int, reason: str, error_json: str, index_keys: Sequence[str] = (), conn: Conn = None
    ) -> str:
        """``canceled`` | ``requested`` | ``terminal`` | ``missing``; ``index_keys`` as for :meth:`settle_run`."""
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.run_done(run_id, queue), k.queue_scheduled(queue),
            k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_prioritized(queue), k.cancel_notices(queue), *index_keys,
        ]  # fmt: skip
        return self._call("cancel_run", keys, [run_id, now_ms, reason, error_json, WAKE_TTL_MS, k.run_prefix(queue)], conn, text)

    def retry_run(self, *, run_id: str, queue: str, now_ms: int, index_keys: Sequence[str] = (), conn: Conn = None) -> RetryReply:
        """``index_keys``: the run's failed / canceled index pairs, which a retried run leaves."""
        k = self.keys
        keys = [
            k.run(run_id, queue), *k.all_runs_status(queue), k.queue_ready(queue), k.run_done(run_id, queue),
            k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_prioritized(queue), k.queue_priority_seq(queue),
            *index_keys,
        ]  # fmt: skip
        return self._call("retry_run", keys, [run_id, now_ms], conn, RetryReply.parse)

    def promote_run(self, *, run_id: str, queue: str, now_ms: int, conn: Conn = None) -> str:
        """``promoted`` | ``not_due`` | ``missing`` | ``stale``."""
        k = self.keys
        keys = [
            k.run(run_id, queue), k.queue_scheduled(queue), k.runs_status("scheduled", queue), k.runs_status("queued", queue),
            k.queue_ready(queue), k.queue_prioritized(queue), k.queue_priority_seq(queue),
        ]  # fmt: skip
        return self._call("promote_run", keys, [run_id, now_ms], conn, text)

    def renew_run_lease(self, *, run_id: str, queue: str, token: str, lease_ms: int, conn: Conn = None) -> bool:
        """Whether the run's lease was ours and is renewed."""
        return self._call("renew_lease", [self.keys.run_lease(run_id, queue)], [token, lease_ms], conn, truthy)

    def release_run_lease(self, *, run_id: str, queue: str, token: str, conn: Conn = None) -> bool:
        """Delete the run's lease if it is ours."""
        return self._call("unlock", [self.keys.run_lease(run_id, queue)], [token], conn, flag)

    def renew_lock(self, *, key: str, token: str, lock_ms: int, conn: Conn = None) -> bool:
        """Whether the leader lock ``key`` was ours and is renewed."""
        return self._call("renew_lease", [key], [token, lock_ms], conn, truthy)

    def release_lock(self, *, key: str, token: str, conn: Conn = None) -> bool:
        """Delete the leader lock ``key`` if it is ours."""
        return self._call("unlock", [key], [token], conn, flag)

    def renew_cron_lock(self, *, token: str, lock_ms: int, conn: Conn = None) -> bool:
        """Whether the cron leader lock was ours and is renewed."""
        return self.renew_lock(key=self.keys.lock_cron(), token=token, lock_ms=lock_ms, conn=conn)

    def release_cron_lock(self, *, token: str, conn: Conn = None) -> bool:
        return self.release_lock(key=self.keys.lock_cron(), token=token, conn=conn)

    def claim_queued_run_for_inline(self, *, run_id: str, queue: str, conn: Conn = None) -> bool:
        k = self.keys
        keys = [k.queue_ready(queue), k.queue_processing(queue), k.run(run_id, queue)]
        return self._call("claim_inline", keys, [run_id], conn, flag)

    def save_step(
        self,
        *,
        run_id: str,
        queue: str,
        token: str,
        name: str,
        step_json: str,
        lease_ms: int,
        marker_started_at_ms: int | None = None,
        expected: str = "",
        blob: tuple[str, str] | None = None,
        check_lease: bool = True,
        behind: Sequence[StepRecord] = (),
        conn: Conn = None,
    ) -> StepSaved:
        """``expected``: write only while the step's record is exactly this one; ``blob``:
        the (field, value) of the run's blob hash that the record's ``@blob:`` reference names.
        ``check_lease=False``: the caller wrote its lease less than half a lease ago, so the
        run hash's fence is check enough (the script reads the lease only if that fails).
        ``behind``: records sent behind (engine/step_records.py), written after this one."""
        marker = "" if marker_started_at_ms is None else str(marker_started_at_ms)
        first = StepRecord(name, step_json, blob)
        keys, args = self._save_step_call(run_id, queue, token, lease_ms, check_lease, first, behind, marker=marker, expected=expected)
        return self._call("save_step", keys, args, conn, StepSaved.parse)

    def send_steps(
        self, *, run_id: str, queue: str, token: str, records: Sequence[StepRecord], lease_ms: int, check_lease: bool,
        conn: CommandSender, on_reply: Callable[[Any], object],
    ) -> None:  # fmt: skip
        """``save_step`` of ``records`` sent without waiting: ``on_reply`` gets its raw reply (or an exception) in the hub."""
        keys, args = self._save_step_call(run_id, queue, token, lease_ms, check_lease, records[0], records[1:])
        conn.send(self._registered["save_step"].command(keys, args), on_reply)

    def _save_step_call(
        self, run_id: str, queue: str, token: str, lease_ms: int, check_lease: bool, first: StepRecord,
        behind: Sequence[StepRecord], *, marker: str = "", expected: str = "",
    ) -> tuple[list[str], list[Any]]:  # fmt: skip
        k = self.keys
        keys = [k.run_steps(run_id, queue), k.run_lease(run_id, queue), k.run(run_id, queue)]
        name, step_json, blob_field, blob = first.args()
        args = [token, name, step_json, marker, lease_ms, expected, blob_field, blob, "1" if check_lease else "0", *records_args(behind)]
        return keys, args

    def confirm_run(self, *, run_id: str, queue: str, token: str, lease_ms: int, conn: Conn = None) -> Ownership:
        """Whether the attempt of lease ``token`` still owns the run (and keeps its lease if so)."""
        k = self.keys
        return self._call("confirm_run", [k.run_lease(run_id, queue), k.run(run_id, queue)], [token, lease_ms], conn, Ownership.parse)

    def purge_invalid_entries(self, *, queue: str, conn: Conn = None) -> list[str]:
        """Remove processing entries that cannot be run ids; returns them (decoded with U+FFFD)."""
        return self._call("purge_invalid_entries", [self.keys.queue_processing(queue)], [], conn, texts)

    def reap_run(self, *, run_id: str, queue: str, conn: Conn = None) -> bool:
        k = self.keys
        keys = [k.queue_processing(queue), k.queue_ready(queue), k.run_lease(run_id, queue)]
        return self._call("reap_run", keys, [run_id], conn, flag)

    def repair_orphan(self, *, run_id: str, queue: str, conn: Conn = None) -> bool:
        """Whether the running run was in no list and unleased, and is now in ready."""
        k = self.keys
        keys = [k.run(run_id, queue), k.run_lease(run_id, queue), k.queue_processing(queue), k.queue_ready(queue)]
        return self._call("repair_orphan", keys, [run_id], conn, flag)

    def watch_run(self, *, run_id: str, queue: str | None, conn: Conn = None) -> list[str | None]:
        """``[status, outputJson, errorJson, cancelReason, queue]`` of the run, flagging
        an unfinished one as waited for (its finisher then pushes the wake-up token)."""
        return self._call("watch_run", [self.keys.run(run_id, queue)], [], conn, list)

    # -- output streams (store/streams.py, engine/streams.py) -----------------
    def append_stream(
        self, *, run_id: str, queue: str | None, token: str, attempt: int, position: int, record: str, now_ms: int, max_items: int
    ) -> StreamAppend:
        """Add one ``ctx.stream`` item (its record JSON, at ``position`` of ``attempt``), fenced by the lease token."""
        keys = [self.keys.run(run_id, queue), self.keys.run_stream(run_id, queue)]
        return self._call("append_stream", keys, [token, attempt, position, record, now_ms, max_items], None, StreamAppend.parse)

    def read_stream(self, *, run_id: str, queue: str | None, after: str, count: int, watch: bool) -> StreamPage:
        """Up to ``count`` items after ``after``, with the run's status; ``watch``: an unfinished run's end is announced."""
        k = self.keys
        keys = [k.run(run_id, queue), k.run_stream(run_id, queue), k.run_stream_signal(run_id, queue)]
        return self._call("read_stream", keys, [after, count, "1" if watch else "0"], None, StreamPage.parse)

    def search_runs(
        self,
        *,
        walk: str,
        probes: Sequence[str],
        after: tuple[str, str] | None,
        wanted: int,
        skip_budget: int,
        batch: int,
        conn: Conn = None,
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
        conn: Conn = None,
    ) -> str:
        """Delete a finished run and every index entry naming it, if it is still
        the run the caller saw (``status``, ``finished_at``: as read; "" for
        unknown): ``purged`` | ``missing`` | ``live`` | ``changed``
        (``queue``: the run's queue; only cluster mode needs it)."""
        own = run_own_keys(self.keys, run_id, queue)
        keys = [*own, *run_index_keys(self.keys, queue, workflow, status, tags or {})]
        return self._call("purge_run", keys, [run_id, len(own), finished_at, workflow, status], conn, text)

    def heal_limit(self, *, held_key: str, queue: str | None, conn: Conn = None) -> int:
        """Count the units of the concurrency limit whose held list is ``held_key``
        again, and move as many held runs back to ready as units are free (how many)."""
        k = self.keys
        keys = [k.limits_held_index(queue), k.runs_status("running", queue)]
        return self._call("heal_limit", keys, [held_key, k.run_prefix(queue)], conn, int)

    def ensure_marker(self, *, queue: str, conn: Conn = None) -> bool:
        """Whether ``queue`` had prioritized runs but no marker, and got one."""
        k = self.keys
        keys = [k.queue_ready(queue), k.queue_processing(queue), k.queue_prioritized(queue)]
        return self._call("ensure_marker", keys, [], conn, flag)

    # -- durable waits and fan-out ---------------------------------------------------
    def deliver_event(self, *, run_id: str, queue: str, step: str, waiting: str, resolved: str, now_ms: int, conn: Conn = None) -> str:
        """``resumed`` | ``delivered`` | ``done`` | ``pending`` | ``gone`` (see deliver_event.lua)."""
        k = self.keys
        keys = [k.run(run_id, queue), *k.all_runs_status(queue), k.run_steps(run_id, queue), k.queue_scheduled(queue), k.queue_ready(queue)]
        return self._call("deliver_event", keys, [run_id, step, waiting, resolved, now_ms], conn, text)

    def child_ended(self, *, child_id: str, parent_id: str, parent_queue: str, now_ms: int, conn: Conn = None) -> str:
        """``resumed`` | ``waiting`` | ``noted`` | ``seen`` | ``gone`` (see child_ended.lua)."""
        k = self.keys
        keys = [
            k.run(parent_id, parent_queue), *k.all_runs_status(parent_queue), k.run_children_ended(parent_id, parent_queue),
            k.queue_scheduled(parent_queue), k.queue_ready(parent_queue),
        ]  # fmt: skip
        return self._call("child_ended", keys, [child_id, parent_id, now_ms], conn, text)

    def list_child(self, *, children_key: str, child_id: str, now_ms: int, conn: Conn = None) -> bool:
        """List ``child_id`` in a parent's children index (``Keys.run_children``),
        if the parent run exists (see list_child.lua)."""
        keys = [self.keys.run_of_children(children_key), children_key]
        return self._call("list_child", keys, [child_id, now_ms], conn, flag)

    def forget_waiters(self, *, event: str, entries: Sequence[tuple[str, str]], conn: Conn = None) -> int:
        """Drop ``(run id, entry or head)`` pairs of ``event``'s waiter index that still hold that entry (or that wait)."""
        return self._call("forget_waiters", [self.keys.event_waiters(event)], [part for pair in entries for part in pair], conn, int)

    def register_waiter(self, *, event: str, run_id: str, head: str, conn: Conn = None) -> bool:
        """Put a run's wait (its entry's ``head``) in ``event``'s waiter index, stamped
        with Redis's time; False if that same wait's entry was there (its stamp kept)."""
        return self._call("register_waiter", [self.keys.event_waiters(event)], [run_id, head], conn, flag)

    # -- signals to a run (store/signals.py) ---------------------------------------
    def send_signal(self, *, run_id: str, queue: str, name: str, payload_json: str, now_ms: int, bounds: tuple[int, int]) -> str:
        """``woken`` | ``stored`` | ``finished`` | ``missing`` | ``full`` (see send_signal.lua);
        ``bounds``: how many may wait per name, and per run."""
        k = self.keys
        keys = [
            k.run(run_id, queue), k.run_signals(run_id, queue), *k.all_runs_status(queue), k.run_steps(run_id, queue),
            k.queue_scheduled(queue), k.queue_ready(queue),
        ]  # fmt: skip
        return self._call("send_signal", keys, [run_id, name, payload_json, now_ms, *bounds], None, text)

    def take_signal(self, *, run_id: str, queue: str, token: str, lease_ms: int, take: SignalTake, conn: Conn = None) -> StepSaved:
        """A signal wait's look (see take_signal.lua): its ``state`` and, taken or over, the step's record in ``current``."""
        k = self.keys
        keys = [k.run_steps(run_id, queue), k.run_lease(run_id, queue), k.run(run_id, queue), k.run_signals(run_id, queue)]
        timeout = "" if take.timeout_at_ms is None else take.timeout_at_ms
        args = [token, take.step, take.signal, take.waiting, take.before, take.after, timeout, take.now_ms, lease_ms]
        return self._call("take_signal", keys, args, conn, StepSaved.parse)

    def schedule_event(self, *, entry: str, at_ms: int, conn: Conn = None) -> float:
        """Store a scheduled event (its ``P:events:scheduled`` member) to fire at
        ``at_ms``, or now by Redis's clock if that is past; returns its fire time."""
        return self._call("schedule_event", [self.keys.scheduled_events()], [entry, at_ms], conn, float)

    def claim_scheduled_events(self, *, most: int, claim_ms: int, conn: Conn = None) -> ScheduledClaim:
        """Take up to ``most`` due scheduled events (or ones whose claim ended) for ``claim_ms``."""
        return self._call("claim_scheduled_events", [self.keys.scheduled_events()], [most, claim_ms], conn, ScheduledClaim.parse)

    def schedule_save(
        self, *, action: str, schedule_id: str, now_ms: int, tick: tuple[int, int] | None = None,
        fields: Mapping[str, str] | None = None, conn: Conn = None,
    ) -> str:  # fmt: skip
        """Create, update, pause, resume or delete a schedule (``tick``: its next tick
        and due ms, None to keep it); "ok", "exists", "missing" or "unchanged"."""
        k = self.keys
        args: list[Any] = [action, schedule_id, now_ms, *(tick if tick is not None else ("", ""))]
        args += [part for pair in (fields or {}).items() for part in pair]
        return self._call("schedule_save", [k.schedule(schedule_id), k.schedules(), k.schedules_next()], args, conn, text)

    def schedule_tick(self, done: TickDone, *, conn: Conn = None) -> str:
        """Record a tick done (or a trigger's run) on its schedule; "ok", "moved" or "gone"."""
        k = self.keys
        args = [
            done.schedule_id, "" if done.done_ms is None else done.done_ms, done.run_id, done.run_at_ms,
            "" if done.next_tick_ms is None else done.next_tick_ms, "" if done.next_tick_ms is None else done.next_due_ms,
            done.fired, done.skipped_late, done.skipped_overlap, done.error,
        ]  # fmt: skip
        return self._call("schedule_tick", [k.schedule(done.schedule_id), k.schedules_next()], args, conn, text)


def run_own_keys(keys: Keys, run_id: str, queue: str | None) -> list[str]:
    """Every key that belongs to one run alone, the run hash first: deleted with the run."""
    return [
        keys.run(run_id, queue),
        keys.run_steps(run_id, queue),
        keys.run_lease(run_id, queue),
        keys.run_done(run_id, queue),
        keys.run_children(run_id, queue),
        keys.run_children_ended(run_id, queue),
        keys.run_stream(run_id, queue),
        keys.run_stream_signal(run_id, queue),
        keys.run_stream_cursors(run_id, queue),
        keys.run_signals(run_id, queue),
        keys.run_blobs(run_id, queue),
        keys.run_terminal(run_id, queue),
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
