"""One claimed run, from lease to finalize.

``Attempt.execute`` is the seed's ``processRun``: start (lease, load,
queued -> running, attempt + 1, step cache: one script), run the handler in
its own greenlet, decide one small outcome (``engine/decide.py``), and
settle it (finalize or schedule a retry, leave processing, release the
lease: one script). The attempt is also the host its steps work for
(``engine/step_host.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import gevent

from redflow.core.errors import CanceledError, RedflowError, UnknownWorkflowError
from redflow.core.flow import parse_limits
from redflow.core.keys import TERMINAL_STATUSES, new_id
from redflow.core.models import OBJECT_RECORDS, EventWaiter, RunField, StepForm, int_field, max_attempts_of
from redflow.core.run_state import RunState
from redflow.core.tags import tags_of
from redflow.core.workflow_def import Registry, WorkflowDef
from redflow.engine import deadlines, parking
from redflow.engine.claim import NOT_AN_ID, Claimed, drop_invalid_entries
from redflow.engine.context import WorkflowContext, call_on_failure
from redflow.engine.decide import Abandoned, Canceled, Failed, HandlerEnd, Outcome, Parked, Retrying, Skipped, Succeeded, decide, returned
from redflow.engine.fence import Fence
from redflow.engine.interrupts import LEASE_LOST, CancelSignal, HandlerInterrupts, RunInterrupt
from redflow.engine.lease import Lease, LeaseKeeper
from redflow.engine.limits import start_admitted
from redflow.engine.observers import AttemptReport, Observers
from redflow.engine.run_info import RunInfo
from redflow.engine.step import StepApi, load_step_cache
from redflow.engine.step_host import RunningStep
from redflow.engine.streams import streamer
from redflow.store import event_waiters, reads
from redflow.store.children import end_for_deadline
from redflow.store.enqueue import enqueue, enqueue_children
from redflow.store.payloads import Blobs, Payloads
from redflow.store.port import Store
from redflow.store.replies import StartReply, StepSaved
from redflow.store.requests import SettleRequest, SignalTake, StartRequest

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.store.mux_connection import Connection

log = logging.getLogger("redflow.attempt")

T = TypeVar("T")

#: The status a settle writes for each outcome it finalizes, schedules or parks.
_SETTLED_AS = {Succeeded: "succeeded", Failed: "failed", Canceled: "canceled", Retrying: "scheduled", Parked: "parked"}


def _mono_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass
class Runtime:
    """What every attempt of one worker shares: its store, and the client its handlers get (over that store)."""

    store: Store
    client: RedflowClient
    registry: Registry
    queues: frozenset[str]
    lease_ms: int
    keeper: LeaseKeeper
    spawn_attempt: Callable[[Attempt], gevent.Greenlet]
    wake_promoter: Callable[[int], None]
    stopping: Callable[[], bool] = field(default=lambda: False)
    #: the worker's workflows with limits, for the start scripts (see engine/limits.py)
    limited: str = ""
    #: how its steps are recorded (objects; arrays with compat="redflow-0.1")
    step_form: StepForm = OBJECT_RECORDS
    observe: Callable[[Attempt, Outcome], None] = field(default=lambda attempt, outcome: None)
    observers: Observers = field(default_factory=Observers)


class Attempt:
    """One execution attempt of one run, on one slot's connection."""

    def __init__(self, rt: Runtime, conn: Connection, claimed: Claimed, *, claim_next: bool = False) -> None:
        self.rt = rt
        self.store = rt.store
        self.claimed = claimed
        self.claimed_at = claimed.claimed_at or time.time()
        self.started_at = 0.0
        self.created_at_ms: int | None = None
        self.conn = conn
        self.queue = queue = claimed.queue
        self.run_id = run_id = claimed.run_id
        self.client = rt.client
        self.payloads: Payloads = rt.store.payloads
        self.step_form = rt.step_form
        self.token = claimed.token
        self.info = RunInfo(run_id, "", queue, 0, 1)
        self.signal = CancelSignal()
        self.running_steps: dict[str, RunningStep] = {}
        self.lease = Lease(run_id, queue, self.token, self.running_steps, on_stop=self._stopped, log_extra=self.log_extra)
        self.lease.renewed_at_ms = claimed.lease_sent_ms
        self._fence: Fence | None = None  # made by the first step or child run that needs it
        #: Whether settling may claim and start the next run of the queue, and what it claimed.
        self.claim_next = claim_next
        self.decide_next: Callable[[], bool] | None = None  # asked at the settle instead of claim_next, if set
        self.next_claim: Claimed | None = None
        self.found_empty = False  # its settle looked for the queue's next run and found none
        #: A run_workflows child: (parent id, parent queue), told when this run ends.
        self.parent_link: tuple[str, str] | None = None
        self._cleanup = True
        self._interrupts = HandlerInterrupts(self.lease)

    def __repr__(self) -> str:
        return f"Attempt({self.run_id}, {self.info.workflow!r}, attempt={self.info.attempt})"

    def now_ms(self) -> int:
        """Redis's clock (see :mod:`redflow.store.server_clock`): step and run times are stored in it."""
        return self.store.now_ms()

    def log_extra(self) -> dict[str, Any]:
        """The structured fields of every log record about this attempt."""
        return {"run_id": self.run_id, "workflow": self.info.workflow, "attempt": self.info.attempt}

    # -- the flow -----------------------------------------------------------
    def execute(self) -> Outcome:
        try:
            outcome = self._execute()
            self._report(outcome)
            return outcome
        finally:
            # The lease record calls back into this attempt: a reference cycle that only the
            # cyclic GC would free (a third of a busy worker's CPU). Cut it; nothing calls back now.
            self.lease.detach()

    def _execute(self) -> Outcome:
        """Start the run, run its handler, settle: the outcome, settled (or why there was nothing to run).
        One exit: every outcome but Skipped goes through the one settle call."""
        outcome = self._outcome()
        return outcome if isinstance(outcome, Skipped) else self.settle(outcome)

    def _outcome(self) -> Outcome:
        """What this attempt came to, not yet settled: Skipped when there was nothing to run."""
        reply, refused = self._start()
        if reply is None:
            drop_invalid_entries(self.store, self.queue, conn=self.conn)
            return Skipped("not a run id")
        if reply.workflow:  # skip / cancel / held name the workflow, for reports and metrics
            self.info = RunInfo(self.run_id, reply.workflow, self.queue, 0, 1)
        if reply.kind in ("busy", "missing", "skip", "held"):
            if reply.kind == "held" and reply.detail:
                self.rt.wake_promoter(int(reply.detail))  # held by the rate limit until then
            return Skipped(f"status {reply.status}" if reply.kind == "skip" else reply.kind)
        if reply.kind == "cancel":
            return Canceled(CanceledError())
        self.started_at = time.time()
        fields = reply.fields
        self._cleanup = RunField.ERROR_JSON in fields or RunField.AVAILABLE_AT in fields or RunField.OUTPUT_JSON in fields
        if RunField.NOTIFY_PARENT in fields:
            self.parent_link = (fields.get(RunField.PARENT_RUN_ID, ""), fields[RunField.NOTIFY_PARENT])
        prepared = self._prepare(fields, reply.attempt, reply.blobs)
        if not isinstance(prepared, tuple):
            return prepared
        workflow, input_value = prepared
        if reply.kind == "expired":  # past a deadline: failed, the handler never called
            return deadlines.expired(workflow, input_value, self.info, reply.detail, self.log_extra())
        if refused is not None:  # a limit's key function failed on the input: deterministic, so no retry
            call_on_failure(workflow, refused, input_value, self.info, self.log_extra())
            return Failed(refused)
        return self._run(workflow, input_value, fields, reply)

    def _start(self) -> tuple[StartReply | None, Exception | None]:
        """The start reply (None: the claimed entry is not a run id), and the error
        of a limit's key function that refused the run's input, if any."""
        rt, reply = self.rt, self.claimed.start
        if reply is None:
            if NOT_AN_ID in self.run_id:  # bytes that are not UTF-8: not a run, and not removable by name
                return None, None
            self.lease.renewed_at_ms = _mono_ms()
            reply = self.store.scripts.start_run(self._start_request(), conn=self.conn)
        if reply.kind == "admit":  # enqueued without the limits its workflow declares
            return start_admitted(self.store, rt.registry, self._start_request(), reply, conn=self.conn)
        return reply, None

    def _start_request(self) -> StartRequest:
        return StartRequest(self.run_id, self.queue, self.token, self.rt.lease_ms, self.now_ms(), self.rt.limited)

    def _run(self, workflow: WorkflowDef, input_value: Any, fields: dict[str, str], reply: StartReply) -> Outcome:
        rt = self.rt
        if rt.observers.active:
            rt.observers.on_start(self.run_id, self.info.workflow, self.queue, self.info.attempt)
            rt.observers.on_attempt_begin(self.info, fields)
        cache, max_seq = load_step_cache(reply.steps)
        self.lease.deadline_ms = self.info.deadline_ms or 0  # the keeper stops the attempt then
        rt.keeper.track(self.lease)
        try:
            return self._run_handler(workflow, input_value, StepApi(self, cache, max_seq, stored=reply.steps, blobs=reply.blobs))
        finally:
            rt.keeper.untrack(self.lease)

    def _report(self, outcome: Outcome) -> None:
        rt = self.rt
        rt.observe(self, outcome)
        if rt.observers.active:
            info = self.info
            report = AttemptReport(
                run_id=self.run_id, workflow=info.workflow, queue=self.queue, attempt=info.attempt, outcome=outcome.kind,
                claimed_at=self.claimed_at, started_at=self.started_at or self.claimed_at, finished_at=time.time(),
                created_at_ms=self.created_at_ms, deadline=deadlines.which(outcome),
            )  # fmt: skip
            rt.observers.on_attempt(report)

    def _prepare(self, fields: dict[str, str], attempt: int, blobs: Blobs) -> tuple[WorkflowDef, Any] | Outcome:
        """Who runs and with what input (read through ``blobs``); a Failed outcome when that cannot be known."""
        what = f"run {self.run_id}"
        name = fields.get(RunField.WORKFLOW, "")
        try:
            self.created_at_ms = int_field(fields, RunField.CREATED_AT, what=what)
            int_field(fields, RunField.ATTEMPT, what=what)  # a count that is not a number is corrupt
            if RunField.LIMITS_JSON in fields:  # limits the scripts could not read fail the run here
                parse_limits(fields[RunField.LIMITS_JSON], self.store.keys.scope(self.queue))
            tags, deadline_ms = tags_of(fields.get(RunField.TAGS_JSON)), int_field(fields, RunField.DEADLINE_AT, what=what)
            self.info = RunInfo(self.run_id, name, self.queue, attempt, max_attempts_of(fields, what=what), tags, deadline_ms)
        except RedflowError as exc:
            return Failed(exc)
        workflow = self.rt.registry.get(name) if name else None
        if workflow is None:
            return Failed(UnknownWorkflowError(name))
        try:
            raw = fields.get(RunField.INPUT_JSON) or None
            input_value = workflow.validate(self.payloads.loads_stored(raw, blobs, run_id=self.run_id, field=RunField.INPUT_JSON))
        except Exception as exc:  # corrupt JSON, a missing blob or a schema's rejection: deterministic, so no retry
            call_on_failure(workflow, exc, None, self.info, self.log_extra())
            return Failed(exc)
        return workflow, input_value

    def _run_handler(self, workflow: WorkflowDef, input_value: Any, steps: StepApi) -> Outcome:
        """The handler runs in this (the slot's) greenlet: no greenlet per run.
        An interrupt is thrown into it only while it is inside the handler."""
        ctx = WorkflowContext(input=input_value, run=self.info, step=steps, signal=self.signal, client=self.client, stream=streamer(self))
        self._interrupts.enter()
        try:
            self.raise_if_interrupted()
            value = workflow.handler(ctx)
        except RunInterrupt as exc:
            end = HandlerEnd(interrupted=self.interrupted or exc.reason)
        except BaseException as exc:  # noqa: BLE001 - a handler's failure (even SystemExit), decided below
            end = HandlerEnd(error=exc, interrupted=self.interrupted)
        else:
            end = returned(value, self.payloads, self.interrupted)
        finally:
            self._interrupts.leave()
        outcome = decide(end, self.info, workflow, self.now_ms() if self.info.deadline_ms else 0)
        if isinstance(outcome, Failed):
            call_on_failure(workflow, outcome.error, input_value, self.info, self.log_extra())
        return outcome

    # -- settling ------------------------------------------------------------
    def settle(self, outcome: Outcome) -> Outcome:
        """Write the outcome: one script call (or a best-effort unlock when
        abandoned), which also claims and starts the slot's next run when it may."""
        if isinstance(outcome, Abandoned):
            if self._fence is not None:
                self._fence.send_behind()  # before the lease goes: what it recorded is not lost with it
            self._release_lease()
            return self._abandoned(outcome)
        status = _SETTLED_AS.get(type(outcome))
        if status is None:
            return outcome
        exceeded = deadlines.exceeded(outcome)
        if exceeded is not None:  # before the settle: see engine/deadlines.py
            end_for_deadline(self.store, self.run_id, self.queue, exceeded.deadline, deadlines.CHILD_CANCEL_REASON)
        request, sent_ms = self._settle_request(outcome, status)
        settled = self.store.scripts.settle_run(request, conn=self.conn)
        if settled.next is not None:
            self.next_claim = Claimed(self.queue, settled.next.run_id, request.next_token, settled.next.start, sent_ms, time.time())
        else:
            self.found_empty = bool(request.next_token)
        final = settled.status
        if final == "stale":
            self.rt.keeper.report_lost(self.lease, "its settle was refused: another worker owns the run now; not finalizing")
            return self._abandoned(Abandoned(LEASE_LOST))
        if final == "scheduled":
            self.rt.wake_promoter(request.retry_at_ms)
        elif final == "parked" and isinstance(outcome, Parked):
            self.rt.wake_promoter(outcome.request.wake_at_ms)
        if (self.parent_link is not None or final == "canceled") and final in TERMINAL_STATUSES:
            parking.after_end(self.store, self.run_id, final, self.parent_link, self.log_extra)  # tell a waiting parent; cancel children
        if final == "canceled" and not isinstance(outcome, Canceled):
            return Canceled(CanceledError())
        return outcome

    def _claims_next(self) -> bool:
        return self.claim_next if self.decide_next is None else self.decide_next()

    def _settle_request(self, outcome: Outcome, status: str) -> tuple[SettleRequest, float]:
        """The settle of ``outcome``, and when it is sent (monotonic ms: a next run's lease counts from it)."""
        rt, now_ms = self.rt, self.now_ms()
        sent_ms = _mono_ms()
        request = SettleRequest(
            self.run_id,
            self.queue,
            status,
            self.token,
            rt.lease_ms,
            now_ms,
            # The hash's fence catches any redflow-gevent attempt that took the run
            # over; the lease key is read too only when ours may have lapsed.
            check_lease=not self.lease.fresh(rt.lease_ms, sent_ms),
            cleanup=self._cleanup,
            next_token=new_id("lease") if not rt.stopping() and self._claims_next() else "",
            index_keys=self.store.keys.terminal_index_keys(self.info.workflow, self.info.tags, self.queue),
            limited=rt.limited,
            steps=self._fence.records_for_settle() if self._fence is not None else (),  # steps recorded behind (engine/step_records.py)
        )
        match outcome:  # a payload over the store's blob threshold goes as a @blob: reference and its blob
            case Succeeded(output_json):
                request.set_output(self.payloads.stored(output_json))
            case Failed(error) | Canceled(error):
                request.set_error(self.payloads.stored(self.payloads.dumps_error(error)))
            case Retrying(error, delay_ms):
                request.set_error(self.payloads.stored(self.payloads.dumps_error(error)), retry_at_ms=now_ms + delay_ms)
            case Parked(park):  # a cancel pending meanwhile ends it canceled, with this error
                request.error_json, request.park = parking.CANCELED_JSON, park.settle_args()
        return request, sent_ms

    def _abandoned(self, outcome: Abandoned) -> Abandoned:
        if self._fence is not None:
            self._fence.cancel_if_canceled()  # stopped between starting children and reading the run again
        return outcome

    @property
    def fence(self) -> Fence:
        """The ownership checks of this attempt (engine/fence.py)."""
        if self._fence is None:
            self._fence = Fence(self.store, self.conn, self.lease, self.rt.keeper, self.rt.lease_ms)
        return self._fence

    def _release_lease(self) -> None:
        try:
            self.store.scripts.release_run_lease(run_id=self.run_id, queue=self.queue, token=self.token, conn=self.conn)
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
        # The lease record's callback: set the signal and interrupt the handler.
        self.signal.set(reason)
        self._interrupts.throw_soon()

    def raise_if_interrupted(self) -> None:
        if self.lease.stopped is not None:
            raise RunInterrupt(self.lease.stopped)

    def interrupts_held(self) -> AbstractContextManager[None]:
        """Nothing is thrown into the handler inside: a stop meanwhile is raised at the end."""
        return self._interrupts.held()

    # -- what its steps ask of it (engine/step_host.py) -------------------------
    def confirm_owner(self) -> None:
        """Before a new step: an attempt whose lease may have lapsed confirms it still owns its run."""
        self.fence.confirm_before_step()

    def fence_children(self, create: Callable[[], T]) -> T:
        """Start child runs with ``create`` so that none outlives a cancel of this run (engine/fence.py)."""
        return self.fence.start_children(create, self.interrupts_held)

    def save_step(self, name: str, step_json: str, expected: str = "", blob: tuple[str, str] | None = None) -> str | None:
        """Record a step (and the ``blob`` it refers to), fenced by the lease (engine/fence.py); ``expected``: only over that record."""
        return self.fence.save_step(name, step_json, expected, blob)

    def take_signal(self, take: SignalTake) -> StepSaved:
        """``step.wait_for_signal``'s take with its step's record, fenced by the lease (engine/fence.py)."""
        return self.fence.take_signal(take)

    def set_progress(self, value_json: str) -> None:
        """``ctx.progress``: one HSET on the run hash."""
        self.store.redis.hset(self.store.keys.run(self.run_id, self.queue), RunField.PROGRESS_JSON, value_json)

    def step_scope(self, name: str) -> AbstractContextManager[Any]:
        return self.rt.observers.step_scope(self.info, name)

    def pause(self, delay_ms: int) -> None:
        """A step's wait between tries (engine/step_retry.py): the slot is kept; an interrupt lands here."""
        gevent.sleep(delay_ms / 1000.0)

    def step_observed(self, name: str, status: str, duration_s: float) -> None:
        observers = self.rt.observers
        if observers.active:
            observers.on_step(self.info.workflow, name, status, duration_s)

    def start_children(self, workflow: WorkflowDef | str, inputs: Sequence[Any], step: str) -> list[str]:
        """Start the children of ``step.run_workflows`` (one per input, idempotent); their ids in input order."""
        requests = self.client.targets.children(workflow, inputs, parent_run_id=self.run_id, parent_queue=self.queue, step=step)
        return enqueue_children(self.store, self.run_id, requests)

    def read_states(self, run_ids: Sequence[str]) -> list[RunState | None]:
        return reads.read_states(self.store, run_ids)

    def emit_run(self, workflow: WorkflowDef | str, input: Any, options: Mapping[str, Any]) -> str:
        """``step.emit_workflow``'s run: linked to this one, not among its children (``EnqueueRequest.detached``)."""
        targets = self.client.targets
        return enqueue(
            self.store,
            targets.request(targets.resolve(workflow), input, parent_run_id=self.run_id, detached=True, keep_existing=True, **options),
        )

    def register_event_wait(self, event: str, waiter: EventWaiter) -> None:
        """Put this run, parking in ``step.wait_for_event``, in ``event``'s waiter index."""
        event_waiters.register(self.store.scripts, event, waiter)

    def forget_event_wait(self, event: str, waiter: EventWaiter) -> None:
        """Take this run, its wait ended, out of ``event``'s waiter index (unless it waits again)."""
        event_waiters.forget(self.store.scripts, event, waiter)

    # -- child runs ------------------------------------------------------------
    def run_child_inline(self, queue: str, child_id: str) -> bool:
        """Run a still-queued child here when this worker serves its queue (the
        seed's inline assist). The child runs in its own greenlet, so that an
        interrupt of this run does not cut the child's attempt short."""
        rt = self.rt
        if queue not in rt.queues or not self.store.scripts.claim_queued_run_for_inline(run_id=child_id, queue=queue, conn=self.conn):
            return False
        rt.spawn_attempt(Attempt(rt, self.conn, Claimed(queue, child_id, new_id("lease")))).join()
        return True
