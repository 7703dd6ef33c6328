"""One claimed run, from lease to finalize.

``Attempt.execute`` is the seed's ``processRun``: start (lease, load,
queued -> running, attempt + 1, step cache: one script), run the handler in
its own greenlet, decide one small outcome, and settle it (finalize or
schedule a retry, leave processing, release the lease: one script).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import gevent
from redis.exceptions import RedisError

from redflow.core import codec
from redflow.core.errors import (
    CanceledError,
    OutputSerializationError,
    RedflowError,
    SerializationError,
    UnknownWorkflowError,
)
from redflow.core.flow import parse_limits
from redflow.core.keys import TERMINAL_STATUSES, new_id
from redflow.core.models import RunField, int_field, max_attempts_of
from redflow.core.retry import compute_retry_delay_ms, is_retryable
from redflow.core.tags import tags_of
from redflow.engine import fence, parking
from redflow.engine.context import (
    CANCELED,
    LEASE_LOST,
    REDIS_LOST,
    WORKER_STOPPED,
    CancelSignal,
    OnFailureContext,
    RunInfo,
    RunInterrupt,
    WorkflowContext,
)
from redflow.engine.lease import Lease
from redflow.engine.limits import start_admitted
from redflow.engine.observers import AttemptReport, Observers
from redflow.engine.step import RunningStep, StepApi, load_step_cache
from redflow.engine.waits import ParkRequest, ParkRun

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.core.keys import Keys
    from redflow.engine.lease import LeaseKeeper
    from redflow.registry import Registry, Workflow
    from redflow.store.mux_connection import Connection
    from redflow.store.scripts import Scripts, StartReply

log = logging.getLogger("redflow.attempt")

T = TypeVar("T")

#: What a reply byte that is not UTF-8 decodes to.
_NOT_AN_ID = "\ufffd"

#: Interrupts after which the attempt is left to another worker, not finalized.
_ABANDONING = (LEASE_LOST, REDIS_LOST, WORKER_STOPPED)


# -- outcomes: what one attempt ended in -----------------------------------
# Per-run values are plain slotted dataclasses: a frozen one's __init__ costs
# three times as much, on the hot path.


@dataclass(slots=True)
class Succeeded:
    kind: ClassVar[str] = "succeeded"
    output_json: str


@dataclass(slots=True)
class Failed:
    kind: ClassVar[str] = "failed"
    error: BaseException


@dataclass(slots=True)
class Retrying:
    kind: ClassVar[str] = "retried"
    error: BaseException
    retry_at: int


@dataclass(slots=True)
class Canceled:
    kind: ClassVar[str] = "canceled"
    error: BaseException


@dataclass(slots=True)
class Parked:
    """Waiting durably (sleep, event, children): the run is ``scheduled`` until its wait ends."""

    kind: ClassVar[str] = "parked"
    request: ParkRequest


@dataclass(slots=True)
class Abandoned:
    """Left for another worker: the lease was lost or the worker is stopping."""

    kind: ClassVar[str] = "abandoned"
    reason: str


@dataclass(slots=True)
class Skipped:
    """Nothing to run: another worker holds it, or it is gone / finished / scheduled."""

    kind: ClassVar[str] = "skipped"
    reason: str


Outcome = Succeeded | Failed | Retrying | Canceled | Parked | Abandoned | Skipped


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class Claimed:
    """A run a slot claimed: ``start`` is its start reply when the claim started
    it in the same call (``take_run``, or a settle's next run), None when the
    attempt starts it (after BLMOVE, or an inline child). ``token`` is the
    lease token it was (or will be) started under, ``lease_sent_ms`` when that
    request was sent (monotonic): the lease cannot lapse before it + lease_ms."""

    queue: str
    run_id: str
    token: str
    start: StartReply | None = None
    lease_sent_ms: float = 0.0
    claimed_at: float = 0.0


@dataclass
class Runtime:
    """What every attempt of one worker shares."""

    client: RedflowClient
    scripts: Scripts
    keys: Keys
    registry: Registry
    queues: frozenset[str]
    lease_ms: int
    keeper: LeaseKeeper
    spawn_attempt: Callable[[Attempt], gevent.Greenlet]
    wake_promoter: Callable[[int], None]
    stopping: Callable[[], bool] = field(default=lambda: False)
    #: the worker's workflows with limits, for the start scripts (see engine/limits.py)
    limited: str = ""
    observe: Callable[[Attempt, Outcome], None] = field(default=lambda attempt, outcome: None)
    observers: Observers = field(default_factory=Observers)


class Attempt:
    """One execution attempt of one run, on one slot's connection."""

    def __init__(self, rt: Runtime, conn: Connection, claimed: Claimed, *, claim_next: bool = False) -> None:
        self.rt = rt
        self.claimed = claimed
        self.claimed_at = claimed.claimed_at or time.time()
        self.started_at = 0.0
        self.created_at_ms: int | None = None
        self.conn = conn
        self.queue = queue = claimed.queue
        self.run_id = run_id = claimed.run_id
        self.client = rt.client
        self.token = claimed.token
        self.info = RunInfo(run_id, "", queue, 0, 1)
        self.signal = CancelSignal()
        self.running_steps: dict[str, RunningStep] = {}
        self.lease = Lease(run_id, queue, self.token, self.running_steps, on_stop=self._stopped, log_extra=self.log_extra)
        self.lease.renewed_at_ms = claimed.lease_sent_ms
        #: Whether settling may claim and start the next run of the queue, and what it claimed.
        self.claim_next = claim_next
        self.next_claim: Claimed | None = None
        #: A run_workflows child: (parent id, parent queue), told when this run ends.
        self.parent_link: tuple[str, str] | None = None
        #: Children were started and the run not read again since (engine/fence.py).
        self.children_unchecked = False
        self._cleanup = True
        self._greenlet: Any = None
        self._in_handler = False
        self._throw_pending = False

    def __repr__(self) -> str:
        return f"Attempt({self.run_id}, {self.info.workflow!r}, attempt={self.info.attempt})"

    def now_ms(self) -> int:
        """Redis's clock (see :mod:`redflow.store.server_clock`): step and run times are stored in it."""
        return self.client.now_ms()

    def log_extra(self) -> dict[str, Any]:
        """The structured fields of every log record about this attempt."""
        return {"run_id": self.run_id, "workflow": self.info.workflow, "attempt": self.info.attempt}

    # -- the flow -----------------------------------------------------------
    def execute(self) -> Outcome:
        try:
            return self._execute()
        finally:
            # The lease record calls back into this attempt: a reference cycle that only the
            # cyclic GC would free (a third of a busy worker's CPU). Cut it; nothing calls back now.
            self.lease.detach()

    def _execute(self) -> Outcome:
        rt = self.rt
        reply = self.claimed.start
        if reply is None:
            if _NOT_AN_ID in self.run_id:  # bytes that are not UTF-8: not a run, and not removable by name
                return self._finish(self._purge_invalid())
            self.lease.renewed_at_ms = _mono_ms()
            reply = rt.scripts.start_run(
                run_id=self.run_id, queue=self.queue, token=self.token, lease_ms=rt.lease_ms, now=self.now_ms(),
                limited=rt.limited, conn=self.conn,
            )  # fmt: skip
        refused = None
        if reply.kind == "admit":  # enqueued without the limits its workflow declares
            reply, refused = start_admitted(self, reply)
        if reply.workflow:  # skip / cancel / held name the workflow, for reports and metrics
            self.info = RunInfo(self.run_id, reply.workflow, self.queue, 0, 1)
        if reply.kind in ("busy", "missing", "skip", "held"):
            if reply.kind == "held" and reply.detail:
                rt.wake_promoter(int(reply.detail))  # held by the rate limit until then
            return self._finish(Skipped(f"status {reply.status}" if reply.kind == "skip" else reply.kind))
        if reply.kind == "cancel":
            return self._finish(self.settle(Canceled(CanceledError())))
        self.started_at = time.time()
        raw_steps = reply.steps
        fields = reply.fields
        self._cleanup = RunField.ERROR_JSON in fields or RunField.AVAILABLE_AT in fields or RunField.OUTPUT_JSON in fields
        if RunField.NOTIFY_PARENT in fields:
            self.parent_link = (fields.get(RunField.PARENT_RUN_ID, ""), fields[RunField.NOTIFY_PARENT])
        prepared = self._prepare(fields, reply.attempt)
        if not isinstance(prepared, tuple):
            return self._finish(self.settle(prepared))
        workflow, input_value = prepared
        if refused is not None:  # a limit's key function failed on the input: deterministic, so no retry
            self._on_failure(workflow, refused, input_value)
            return self._finish(self.settle(Failed(refused)))
        if rt.observers.active:
            rt.observers.on_start(self.run_id, self.info.workflow, self.queue, self.info.attempt)
            rt.observers.on_attempt_begin(self.info, fields)
        cache, max_seq = load_step_cache(raw_steps)
        rt.keeper.track(self.lease)
        try:
            outcome = self._run_handler(workflow, input_value, StepApi(self, cache, max_seq))
        finally:
            rt.keeper.untrack(self.lease)
        return self._finish(self.settle(outcome))

    def _purge_invalid(self) -> Outcome:
        removed = self.rt.scripts.purge_invalid_entries(queue=self.queue, conn=self.conn)
        log.warning("queue %r: dropped %d entry(ies) that are not run ids: %r", self.queue, len(removed), removed[:5])
        return Skipped("not a run id")

    def _finish(self, outcome: Outcome) -> Outcome:
        rt = self.rt
        rt.observe(self, outcome)
        if rt.observers.active:
            info = self.info
            rt.observers.on_attempt(
                AttemptReport(
                    run_id=self.run_id,
                    workflow=info.workflow,
                    queue=self.queue,
                    attempt=info.attempt,
                    outcome=outcome.kind,
                    claimed_at=self.claimed_at,
                    started_at=self.started_at or self.claimed_at,
                    finished_at=time.time(),
                    created_at_ms=self.created_at_ms,
                )
            )
        return outcome

    def _prepare(self, fields: dict[str, str], attempt: int) -> tuple[Workflow, Any] | Outcome:
        """Who runs and with what input; a Failed outcome when that cannot be known."""
        what = f"run {self.run_id}"
        name = fields.get(RunField.WORKFLOW, "")
        try:
            self.created_at_ms = int_field(fields, RunField.CREATED_AT, what=what)
            int_field(fields, RunField.ATTEMPT, what=what)  # a count that is not a number is corrupt
            if RunField.LIMITS_JSON in fields:  # limits the scripts could not read fail the run here
                parse_limits(fields[RunField.LIMITS_JSON], self.rt.keys.scope(self.queue))
            tags = tags_of(fields.get(RunField.TAGS_JSON))
            self.info = RunInfo(self.run_id, name, self.queue, attempt, max_attempts_of(fields, what=what), tags)
        except RedflowError as exc:
            return Failed(exc)
        workflow = self.rt.registry.get(name) if name else None
        if workflow is None:
            return Failed(UnknownWorkflowError(name))
        try:
            raw = fields.get(RunField.INPUT_JSON)
            input_value = workflow.validate(codec.loads(raw if raw not in (None, "") else "null", what=f"{what} inputJson"))
        except Exception as exc:  # corrupt JSON or a schema's rejection: deterministic, so no retry
            self._on_failure(workflow, exc, None)
            return Failed(exc)
        return workflow, input_value

    def _run_handler(self, workflow: Workflow, input_value: Any, steps: StepApi) -> Outcome:
        """The handler runs in this (the slot's) greenlet: no greenlet per run.
        An interrupt is thrown into it only while it is inside the handler."""
        ctx = WorkflowContext(input=input_value, run=self.info, step=steps, signal=self.signal, client=self.client)
        self._greenlet = gevent.getcurrent()
        self._in_handler = True
        try:
            self.raise_if_interrupted()
            result: tuple[str, Any] = ("ok", workflow.handler(ctx))
        except RunInterrupt as exc:
            result = ("interrupted", exc.reason)
        except BaseException as exc:  # noqa: BLE001 - a handler's failure (even SystemExit), decided below
            result = ("error", exc)
        finally:
            self._in_handler = False
        return self._decide(workflow, input_value, result)

    def _decide(self, workflow: Workflow, input_value: Any, result: tuple[str, Any]) -> Outcome:
        kind, value = result
        if self.interrupted in _ABANDONING:
            return Abandoned(self.interrupted)
        if self.interrupted == CANCELED or (kind == "error" and isinstance(value, CanceledError)):
            return Canceled(value if isinstance(value, CanceledError) else CanceledError())
        if kind == "error" and isinstance(value, ParkRun):
            return Parked(value.request)
        if kind == "error":
            if is_retryable(value) and self.info.attempt < self.info.max_attempts:
                return Retrying(value, self.now_ms() + compute_retry_delay_ms(self.info.attempt))
            self._on_failure(workflow, value, input_value)
            return Failed(value)
        try:
            return Succeeded(codec.dumps(value, what="output"))
        except SerializationError as exc:
            error = OutputSerializationError(f"Workflow output is not JSON-serializable: {exc}")
            self._on_failure(workflow, error, input_value)
            return Failed(error)

    def _on_failure(self, workflow: Workflow, error: BaseException, input_value: Any) -> None:
        if workflow.on_failure is None:
            return
        try:
            workflow.on_failure(OnFailureContext(error=error, input=input_value, run=self.info))
        except Exception:  # on_failure must never break finalization (as in the seed)
            log.exception("on_failure of %s raised; ignored", workflow.name, extra=self.log_extra())

    # -- settling ------------------------------------------------------------
    def settle(self, outcome: Outcome) -> Outcome:
        """Write the outcome: one script call (or a best-effort unlock when
        abandoned), which also claims and starts the slot's next run when it may."""
        rt, now = self.rt, self.now_ms()
        args: dict[str, Any]
        match outcome:
            case Succeeded(output_json):
                args = {"status": "succeeded", "output_json": output_json}
            case Failed(error):
                args = {"status": "failed", "error_json": codec.dumps_error(error)}
            case Canceled(error):
                args = {"status": "canceled", "error_json": codec.dumps_error(error)}
            case Retrying(error, retry_at):
                args = {"status": "scheduled", "error_json": codec.dumps_error(error), "retry_at": retry_at}
            case Parked(request):  # a cancel pending meanwhile ends it canceled, with this error
                args = {"status": "parked", "error_json": parking.CANCELED_JSON, "park": request.settle_args()}
            case Abandoned():
                self._release_lease()
                return self._abandoned(outcome)
            case _:
                return outcome
        next_token = new_id("lease") if self.claim_next and not rt.stopping() else ""
        sent_ms = _mono_ms()
        settled = rt.scripts.settle_run(
            run_id=self.run_id,
            queue=self.queue,
            now=now,
            token=self.token,
            lease_ms=rt.lease_ms,
            # The hash's fence catches any redflow-gevent attempt that took the run
            # over; the lease key is read too only when ours may have lapsed.
            check_lease=sent_ms - self.lease.renewed_at_ms >= rt.lease_ms / 2,
            cleanup=self._cleanup,
            next_token=next_token,
            index_keys=rt.keys.terminal_index_keys(self.info.workflow, self.info.tags, self.queue),
            limited=rt.limited,
            conn=self.conn,
            **args,
        )
        if settled.next is not None:
            self.next_claim = Claimed(self.queue, settled.next.run_id, next_token, settled.next.start, sent_ms, time.time())
        final = settled.status
        if final == "stale":
            self.rt.keeper.report_lost(self.lease, "its settle was refused: another worker owns the run now; not finalizing")
            return self._abandoned(Abandoned(LEASE_LOST))
        if final == "scheduled":
            self.rt.wake_promoter(args["retry_at"])
        elif final == "parked" and isinstance(outcome, Parked):
            self.rt.wake_promoter(outcome.request.wake_at)
        if (self.parent_link is not None or final == "canceled") and final in TERMINAL_STATUSES:
            parking.after_end(self, final)  # tell a waiting parent; cancel children
        if final == "canceled" and not isinstance(outcome, Canceled):
            return Canceled(CanceledError())
        return outcome

    def _abandoned(self, outcome: Abandoned) -> Abandoned:
        if self.children_unchecked:  # stopped between starting children and reading the run again
            fence.cancel_if_canceled(self)
        return outcome

    def _release_lease(self) -> None:
        try:
            self.rt.scripts.release_run_lease(run_id=self.run_id, queue=self.queue, token=self.token, conn=self.conn)
        except Exception as exc:  # the lease expires by itself; unlocking only speeds recovery up
            log.info("run %s: could not release its lease (%s)", self.run_id, exc)

    # -- interruption --------------------------------------------------------
    @property
    def interrupted(self) -> str | None:
        """Why the attempt was stopped (the first reason), or None."""
        return self.lease.stopped

    def interrupt(self, reason: str) -> None:
        """Stop the handler (canceled, lease lost, worker stopping), through
        the lease record so that the keeper stops watching it too."""
        self.lease.stop(reason)

    def _stopped(self, reason: str) -> None:
        # The lease record's callback: set the signal and throw an interrupt
        # into the greenlet running the handler.
        self.signal.set(reason)
        if self._in_handler and not self._throw_pending and self._greenlet is not gevent.getcurrent():
            self._throw_pending = True
            gevent.get_hub().loop.run_callback(self._throw)

    def _throw(self) -> None:
        # Runs in the hub, so the handler's greenlet is suspended: if it is
        # still inside the handler, the interrupt lands there, as a
        # gevent.Timeout would; if it has moved on (settling), nothing happens.
        self._throw_pending = False
        glet = self._greenlet
        if self._in_handler and glet is not None and not glet.dead:
            glet.throw(RunInterrupt(self.interrupted or CANCELED))

    def raise_if_interrupted(self) -> None:
        if self.interrupted is not None:
            raise RunInterrupt(self.interrupted)

    @contextmanager
    def interrupts_held(self) -> Iterator[None]:
        """Nothing is thrown into the handler inside: a stop meanwhile is raised at the end."""
        held, self._in_handler = self._in_handler, False
        try:
            yield
        finally:
            self._in_handler = held
        self.raise_if_interrupted()

    def confirm_owner(self) -> None:
        """Before a new step: an attempt whose lease may have lapsed confirms it still owns its run."""
        fence.confirm_before_step(self)

    def fence_children(self, create: Callable[[], T]) -> T:
        """Start child runs with ``create`` so that none outlives a cancel of this run (engine/fence.py)."""
        return fence.start_children(self, create)

    def save_step(self, name: str, step_json: str, expected: str = "") -> str | None:
        """Record a step, fenced by the lease; a pending cancel stops the run here.
        Redis failing here is the engine's trouble, not the handler's: the
        attempt is abandoned (recovered later), not failed. ``expected``: write
        only over that record; if the step holds another, it is returned."""
        try:
            saved = self.rt.scripts.save_step(
                run_id=self.run_id, queue=self.queue, token=self.token, name=name, step_json=step_json,
                lease_ms=self.rt.lease_ms, expected=expected, conn=self.conn,
            )  # fmt: skip
        except RedisError as exc:
            log.warning("run %s: could not record step %r (%s); leaving the run to be recovered", self.run_id, name, exc,
                        extra=self.log_extra())  # fmt: skip
            self.interrupt(REDIS_LOST)
            raise RunInterrupt(REDIS_LOST) from exc
        if saved.state == "stale":
            self.rt.keeper.report_lost(self.lease, f"its record of step {name!r} was refused")
        elif saved.cancel_requested_at:
            self.interrupt(CANCELED)
        self.raise_if_interrupted()
        return saved.current if saved.state == "changed" else None

    def set_progress(self, value_json: str) -> None:
        """``ctx.progress``: one HSET on the run hash."""
        self.client.redis.hset(self.rt.keys.run(self.run_id, self.queue), RunField.PROGRESS_JSON, value_json)

    def step_scope(self, name: str) -> AbstractContextManager[Any]:
        return self.rt.observers.step_scope(self.info, name)

    def step_observed(self, name: str, status: str, duration_s: float) -> None:
        observers = self.rt.observers
        if observers.active:
            observers.on_step(self.info.workflow, name, status, duration_s)

    # -- child runs ------------------------------------------------------------
    def run_child_inline(self, queue: str, child_id: str) -> bool:
        """Run a still-queued child here when this worker serves its queue (the
        seed's inline assist). The child runs in its own greenlet, so that an
        interrupt of this run does not cut the child's attempt short."""
        rt = self.rt
        if queue not in rt.queues or not rt.scripts.claim_queued_run_for_inline(run_id=child_id, queue=queue, conn=self.conn):
            return False
        rt.spawn_attempt(Attempt(rt, self.conn, Claimed(queue, child_id, new_id("lease")))).join()
        return True
