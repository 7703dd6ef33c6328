"""Workflows run inline: a workflow, its steps and child runs in the calling
greenlet, with no worker and no Redis, for fast unit tests of a handler's
logic. Steps go through the engine's own ``StepApi``, so the worker's rules
hold (unique names, JSON outputs, timeouts, replay of succeeded steps on a retry).

Durable waits park inline runs as a worker parks them, against the runner's
clock (local time plus what it was moved on): a sleep jumps the clock to its
wake time; an event wait resumes on a matching :meth:`InlineRunner.emit_event`
(or another inline run's), and times out when :meth:`InlineRunner.advance`
moves the clock on; a signal wait takes one :meth:`InlineRunner.signal` sent
(also before it waited); a ``run_workflows`` parent resumes when its last
child ends. ``emit_workflow``'s runs run at once, as children do.

Retries, deadlines, singleton and debounce (``inline_keys.py``) use the same
clock: a retry's wait and a step's wait between tries are fast-forwarded like
sleeps; a ``delay=`` or debounced run starts when :meth:`InlineRunner.advance`
reaches its due time, or fails with ``DeadlineExceededError`` past its
``start_within``; ``timeout`` is checked at each step, retry and wait, and a
parked run whose deadline passes fails then, its unfinished children canceled.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from redflow.core import clock, codec
from redflow.core.deadlines import late as late_for
from redflow.core.errors import DeadlineExceededError, RedflowError, UnknownWorkflowError
from redflow.core.idempotency import event_run_idempotency_key, step_workflows_idempotency_key
from redflow.core.models import OBJECT_RECORDS, STEP_SUCCEEDED, WAIT_CHILDREN, WAIT_SIGNAL, WAIT_SLEEP, EventWaiter, StepField
from redflow.core.run_state import RunState
from redflow.core.streams import StreamWriter
from redflow.core.workflow_def import Registry, WorkflowDef, get_default_registry
from redflow.engine import deadlines
from redflow.engine.context import WorkflowContext, call_on_failure
from redflow.engine.decide import Canceled, Failed, HandlerEnd, Parked, Retrying, Succeeded, decide, returned
from redflow.engine.interrupts import DEADLINE, CancelSignal, RunInterrupt
from redflow.engine.run_info import RunInfo
from redflow.engine.step import StepApi, load_step_cache
from redflow.engine.step_host import RunningStep, StepHost
from redflow.engine.waits import ParkRequest
from redflow.store.payloads import PLAIN
from redflow.store.replies import StepSaved
from redflow.store.requests import SignalTake
from redflow.testing.inline_keys import InlineKeys
from redflow.testing.inline_runs import UNFINISHED, InlineEvent, InlineRun
from redflow.testing.inline_signals import SignalBuffers

if TYPE_CHECKING:
    from redflow.client import RedflowClient

log = logging.getLogger("redflow.testing")

T = TypeVar("T")


class _InlineClient:
    """Stands in for the client inside inline runs (``ctx.client`` and the steps' client):
    runs started here run at once, in the calling greenlet."""

    def __init__(self, runner: InlineRunner, current: InlineRun) -> None:
        self._runner = runner
        self._current = current

    def run(
        self, workflow: WorkflowDef | str, input: Any = None, *, idempotency_key: str | None = None, max_attempts: int | None = None,
        parent_run_id: str | None = None, delay: float | None = None, run_at: float | None = None, **_options: Any,
    ) -> InlineRun:  # fmt: skip
        """``client.run``: a run with ``delay`` or ``run_at`` waits for :meth:`InlineRunner.advance`; ``queue`` is ignored."""
        return self._runner.start(
            workflow, input, idempotency_key=idempotency_key, max_attempts=max_attempts, parent=self._current, delay=delay, at=run_at
        )

    def wait_for(self, run_id: str, *, timeout: float = 30.0, assist: Any = None) -> InlineRun:
        return self._runner.runs[run_id]

    def emit_event(self, name: str, payload: Any = None, idempotency_key: str | None = None) -> list[str]:
        return self._runner.fan_out(self._current, name, payload, idempotency_key, at=None)

    def schedule_event(self, name: str, payload: Any = None, at: float | None = None, idempotency_key: str | None = None) -> list[str]:
        if at is None:
            raise RedflowError("schedule_event needs at= (unix seconds)")
        return self._runner.fan_out(self._current, name, payload, idempotency_key, at=at)


class _InlineAttempt:
    """The attempt ``StepApi`` works for: the attributes and methods it uses, without Redis."""

    def __init__(self, runner: InlineRunner, run: InlineRun, queue: str) -> None:
        self._runner = runner
        self.run_id = run.id
        self.info = RunInfo(run.id, run.workflow, queue, run.attempt, run.max_attempts, deadline_ms=run.deadline_ms)
        self.signal = CancelSignal()  # nothing cancels an inline run from outside
        self.client = _InlineClient(runner, run)
        self.payloads = PLAIN
        self.step_form = OBJECT_RECORDS
        self.running_steps: dict[str, RunningStep] = {}
        self._run = run

    def now_ms(self) -> int:
        return self._runner.now_ms()  # no Redis: the runner's clock

    def raise_if_interrupted(self) -> None:
        """Only its deadline interrupts an inline run (checked at each step): no lease to lose, no worker stopping."""
        deadline_ms = self.info.deadline_ms
        if deadline_ms is not None and self.now_ms() >= deadline_ms:
            raise RunInterrupt(DEADLINE)

    def pause(self, delay_ms: int) -> None:
        """A step's wait between tries: fast-forwarded."""
        self._runner.skip_ms(delay_ms)

    def confirm_owner(self) -> None:
        """An inline run has no lease to lose."""

    def fence_children(self, create: Callable[[], T]) -> T:
        return create()  # nothing cancels an inline run from outside

    def save_step(self, name: str, step_json: str, expected: str = "", blob: tuple[str, str] | None = None) -> str | None:
        current = self._run.step_records.get(name)
        if expected and current != expected:
            return current or ""
        self._run.step_records[name] = step_json
        return None

    def set_progress(self, value_json: str) -> None:
        self._run.progress = codec.loads(value_json)

    def step_scope(self, name: str) -> AbstractContextManager[Any]:
        return nullcontext()

    def step_observed(self, name: str, status: str, duration_s: float) -> None:
        """No observers inline."""

    def run_child_inline(self, queue: str, child_id: str) -> bool:
        return False  # children already ran when they were started

    def start_children(self, workflow: WorkflowDef | str, inputs: Sequence[Any], step: str) -> list[str]:
        runner, name = self._runner, self._runner.resolve(workflow).name
        return [
            runner.start(
                workflow,
                value,
                idempotency_key=step_workflows_idempotency_key(self.run_id, step, name, index),
                parent=self._run,
                one_run=False,
            ).id
            for index, value in enumerate(inputs)
        ]

    def read_states(self, run_ids: Sequence[str]) -> list[RunState | None]:
        return [self._runner.state_of(run_id) for run_id in run_ids]

    def take_signal(self, take: SignalTake) -> StepSaved:
        return self._runner.signals.take(self.run_id, self._run.step_records, take)

    def emit_run(self, workflow: WorkflowDef | str, input: Any, options: Mapping[str, Any]) -> str:  # at once, delay or not
        return self.client.run(workflow, input, idempotency_key=options.get("idempotency_key"), max_attempts=options.get("max_attempts")).id

    def register_event_wait(self, event: str, waiter: EventWaiter) -> None:
        runner = self._runner
        known = runner.event_waits.get(waiter.run_id)
        if known is None or known[0] != event or known[1].head() != waiter.head():  # the same wait keeps its start
            runner.event_waits[waiter.run_id] = (event, replace(waiter, since=runner.event_time_ms()))

    def forget_event_wait(self, event: str, waiter: EventWaiter) -> None:
        known = self._runner.event_waits.get(waiter.run_id)
        if known is not None and known[0] == event and known[1].head() == waiter.head():
            del self._runner.event_waits[waiter.run_id]


def _as_step_host(attempt: _InlineAttempt) -> StepHost:
    """Where mypy checks that the inline attempt implements what steps need."""
    return attempt


class InlineRunner:
    """Runs workflows inline; keeps every run it made in ``runs`` (children and event runs too).

    Workflow names resolve in ``registry`` (default: the default registry). Idempotency keys
    work as with Redis: the same key gives the same run, unless that run failed or was
    canceled. Retries, delays, deadlines, singleton, debounce and durable waits run on the
    runner's clock: see the module's docstring."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry if registry is not None else get_default_registry()
        self.runs: dict[str, InlineRun] = {}
        #: Runs parked in ``wait_for_event``: run id -> (event, entry).
        self.event_waits: dict[str, tuple[str, EventWaiter]] = {}
        self.signals = SignalBuffers()  # sent by signal(), not taken yet
        self._keys: dict[tuple[str, str], str] = {}
        self.one_run = InlineKeys()
        self._ahead_ms = 0
        self._scheduled_events: list[tuple[float, str, str]] = []  # (fire ms, event, payload JSON)

    def run(
        self, workflow: WorkflowDef | str, input: Any = None, *, max_attempts: int | None = None, delay: float | None = None
    ) -> InlineRun:
        """Run ``workflow`` to its end (or until it parks) and return the run (see ``InlineRun.result()``);
        with ``delay`` (seconds), it starts when :meth:`advance` reaches its due time."""
        return self.start(workflow, input, max_attempts=max_attempts, delay=delay)

    def now_ms(self) -> int:
        """The runner's clock: local time, plus every sleep fast-forwarded and every :meth:`advance`."""
        return clock.now_ms() + self._ahead_ms

    def skip_ms(self, ms: int) -> None:
        """Move the clock on by ``ms`` without running anything (a wait fast-forwarded)."""
        self._ahead_ms += max(0, ms)

    def event_time_ms(self) -> float:
        """The runner's clock to the microsecond: when a wait began, when a scheduled
        event fires (those a few microseconds apart are ordered, as on Redis)."""
        return time.time() * 1000.0 + self._ahead_ms

    def resolve(self, workflow: WorkflowDef | str) -> WorkflowDef:
        found = self.registry.get(workflow) if isinstance(workflow, str) else workflow
        if found is None:
            raise UnknownWorkflowError(str(workflow or ""))
        return found

    def start(
        self, workflow: WorkflowDef | str, input: Any = None, *, idempotency_key: str | None = None, max_attempts: int | None = None,
        parent: InlineRun | None = None, at: float | None = None, delay: float | None = None, one_run: bool = True,
    ) -> InlineRun:  # fmt: skip
        """Create a run (as ``client.run`` would: input validated, JSON only; a singleton's or a
        debounce's run, ``one_run``: not a ``run_workflows`` child, ``inline_keys.py``) and run it,
        unless due later (unix time ``at`` or ``delay`` seconds): then :meth:`advance` starts it."""
        wf = self.resolve(workflow)
        if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
            raise RedflowError("max_attempts must be an int >= 1")
        key = (wf.name, idempotency_key) if idempotency_key else None
        existing = self.runs.get(self._keys.get(key, "")) if key else None
        if existing is not None and existing.status not in ("failed", "canceled"):
            return existing
        value, created_ms = wf.validate(input), self.now_ms()
        input_json = PLAIN.input_json(value, wf.name)
        one_key = self.one_run.key_of(wf, value) if one_run else None  # a singleton or debounce key
        held = (
            None if one_key is None else self.one_run.existing(wf, one_key, codec.loads(input_json), created_ms, delayed=bool(at or delay))
        )
        if held is not None:
            return held
        run = InlineRun(f"run_{uuid.uuid4()}", wf.name, codec.loads(input_json), max_attempts or wf.max_attempts, created_ms=created_ms)
        self.runs[run.id] = run
        if key:
            self._keys[key] = run.id
        if parent is not None:
            parent.children.append(run)
            run.parent_id = parent.id
        debounce_ms = self.one_run.hold(wf, one_key, run) if one_key is not None else 0
        due_ms = int(at * 1000) if at is not None else created_ms + int((delay or 0) * 1000 or debounce_ms)
        due_ms = wf.deadlines.due_ms(created_ms, due_ms)
        run.start_by_ms, run.deadline_ms = wf.deadlines.times(created_ms, due_ms)
        if due_ms > created_ms:
            run.status, run.due_ms = "scheduled", due_ms
        else:
            self._execute(wf, run)
        return run

    def _execute(self, wf: WorkflowDef, run: InlineRun, *, resuming: bool = False) -> None:
        """Attempts until success, a final failure, a cancel or a park; succeeded steps replay
        (decided as a worker decides: ``engine/decide.py``)."""
        value = wf.validate(run.input)  # the worker validates the stored input again
        while True:
            late = late_for(run.start_by_ms, run.deadline_ms, started=run.attempt > 0, now_ms=self.now_ms())
            if late:  # as the start script refuses it: failed, the handler not called
                info = RunInfo(run.id, run.workflow, wf.queue, run.attempt, run.max_attempts, deadline_ms=run.deadline_ms)
                self._end(run, deadlines.expired(wf, value, info, late))
                return
            run.attempt += 0 if resuming else 1
            run.status, run.parked, resuming = "running", None, False
            host = _InlineAttempt(self, run, wf.queue)
            cache, max_seq = load_step_cache(run.step_records)
            ctx = WorkflowContext(
                input=value,
                run=host.info,
                step=StepApi(_as_step_host(host), cache, max_seq, stored=run.step_records),
                signal=host.signal,
                client=cast("RedflowClient", host.client),
                stream=StreamWriter(run.stream.append_item, run.attempt, self.now_ms),
            )
            try:
                end = returned(wf.handler(ctx), PLAIN)
            except RunInterrupt as exc:  # its deadline, checked at a step
                end = HandlerEnd(interrupted=exc.reason)
            except BaseException as exc:  # noqa: BLE001 - a handler's failure (even SystemExit), decided below
                end = HandlerEnd(error=exc)
            outcome = decide(end, host.info, wf, self.now_ms())
            match outcome:
                case Parked(request):
                    if self._park(run, request):
                        resuming = True
                        continue
                    return
                case Retrying(delay_ms=delay_ms):
                    run.retry_delays_ms.append(delay_ms)
                    self.skip_ms(delay_ms)  # the wait, fast-forwarded
                    continue
                case Succeeded() | Failed() | Canceled():
                    if isinstance(outcome, Failed):
                        call_on_failure(wf, outcome.error, value, host.info)
                    self._end(run, outcome)
            return

    def _end(self, run: InlineRun, outcome: Succeeded | Failed | Canceled) -> None:
        """The run ended so: store it (a run failed by its deadline cancels its unfinished children), tell its parent."""
        match outcome:
            case Canceled(error):
                run.status, run.error = "canceled", error
            case Failed(error):
                run.status, run.error = "failed", error
                if isinstance(error, DeadlineExceededError):
                    run.cancel_children(deadlines.CHILD_CANCEL_REASON)
            case Succeeded(output_json):
                run.status, run.output = "succeeded", codec.loads(output_json)
        self._wake_parent(run)

    def _park(self, run: InlineRun, request: ParkRequest) -> bool:
        """Park ``run`` as a worker's settle does; whether it goes on at once (a
        sleep is fast-forwarded: the clock jumps to its wake time)."""
        self._store_wait(run, request)
        run.stream.park()
        if request.reason == WAIT_SLEEP:
            self._ahead_ms += max(0, request.wake_at_ms - self.now_ms())
            return True
        if request.reason == WAIT_SIGNAL and self.signals.pending(run.id, request.signal):
            return True  # sent while the step looked: as the worker's settle, it does not park
        run.status, run.parked = "scheduled", request
        return False

    @staticmethod
    def _store_wait(run: InlineRun, request: ParkRequest) -> None:
        """What the settle of a parking attempt stores: the step's waiting record (unless resolved meanwhile)."""
        current = codec.try_loads(run.step_records.get(request.step))
        if not (isinstance(current, dict) and current.get(StepField.STATUS) == STEP_SUCCEEDED):
            run.step_records[request.step] = request.record

    def _resume(self, run: InlineRun) -> None:
        if run.parked is not None:
            self._execute(self.resolve(run.workflow), run, resuming=True)

    def _wake_parent(self, child: InlineRun) -> None:
        """A child ended: its parent, parked for its children, resumes once none is left running."""
        parent = self.runs.get(child.parent_id or "")
        if parent is None or parent.parked is None or parent.parked.reason != WAIT_CHILDREN:
            return
        if all(self.runs[i].status not in UNFINISHED for i in parent.parked.running if i in self.runs):
            self._resume(parent)

    def state_of(self, run_id: str) -> RunState | None:
        """What ``client.read_states`` reads of a run."""
        run = self.runs.get(run_id)
        if run is None:
            return None
        output_json = codec.dumps(run.output) if run.status == "succeeded" else None
        error_json = codec.dumps_error(run.error) if run.status == "failed" and run.error is not None else None
        return RunState(run.id, run.status, "", output_json, error_json, None)

    def emit_event(self, name: str, payload: Any = None, idempotency_key: str | None = None) -> list[str]:
        """``client.emit_event``: start the subscribers, and resume the runs waiting for ``name``
        whose match ``payload`` satisfies. Returns the ids of the runs started."""
        return self.fan_out(None, name, payload, idempotency_key, at=None)

    def signal(self, run_id: str, name: str, payload: Any = None) -> bool:
        """``client.signal``: keep signal ``name`` for run ``run_id`` until a wait takes it (a run
        waiting for it resumes now); False, storing nothing, for a run that ended or is unknown."""
        run = self.runs.get(run_id)
        if run is None or not self.signals.send(run_id, run.status, name, payload):
            return False
        if run.parked is not None and run.parked.reason == WAIT_SIGNAL and run.parked.signal == name:
            self._resume(run)
        return True

    def advance(self, seconds: float) -> None:
        """Move the runner's clock on: scheduled events due by then reach their
        waiters, runs whose wait is due (an event wait's timeout, a deadline)
        resume, and delayed runs due by then start, at the new time."""
        self._ahead_ms += int(seconds * 1000)
        now_ms = self.now_ms()
        due = sorted(event for event in self._scheduled_events if event[0] <= now_ms)
        self._scheduled_events = [event for event in self._scheduled_events if event[0] > now_ms]
        for fire_ms, name, payload_json in due:
            self._deliver(name, payload_json, fire_ms)
        parked = sorted(
            (run for run in self.runs.values() if run.parked is not None and run.parked.wake_at_ms <= now_ms),
            key=lambda run: run.parked.wake_at_ms if run.parked else 0,
        )
        for run in parked:
            self._resume(run)
        delayed = [run for run in self.runs.values() if run.due_ms is not None and run.due_ms <= now_ms]
        for run in sorted(delayed, key=lambda run: run.due_ms or 0):
            if run.due_ms is not None:  # not canceled meanwhile
                run.due_ms = None
                self._execute(self.resolve(run.workflow), run)

    def fan_out(self, current: InlineRun | None, name: str, payload: Any, idempotency_key: str | None, *, at: float | None) -> list[str]:
        """An event: start (or schedule) one run per workflow subscribed to ``name``, and
        deliver it to the runs waiting for it (now, or when the clock reaches ``at``)."""
        if not name or not isinstance(name, str):
            raise RedflowError("an event needs a non-empty name")
        payload_json = PLAIN.event_json(payload, name)
        if at is None:
            self._deliver(name, payload_json)
        else:
            self._scheduled_events.append((max(at * 1000.0, self.event_time_ms()), name, payload_json))
        key = event_run_idempotency_key(name, idempotency_key) if idempotency_key else None
        subscribers = [wf for wf in self.registry.list() if name in wf.events]
        ids = tuple(self.start(wf, payload, idempotency_key=key, at=at).id for wf in subscribers)
        if current is not None:
            current.events.append(InlineEvent(name, payload, at, ids))
        return list(ids)

    def _deliver(self, name: str, payload_json: str, fired_at: float | None = None) -> None:
        """Resolve the waits for ``name`` that the payload matches (of a scheduled
        event, those begun before ``fired_at``), each once, and resume their runs."""
        payload = codec.loads(payload_json)
        for run_id, (event, waiter) in list(self.event_waits.items()):
            run = self.runs[run_id]
            resolved = waiter.resolved(payload_json, self.now_ms())
            if event != name or not waiter.accepts(payload) or resolved is None:
                continue
            if fired_at is not None and not waiter.began_before(fired_at):
                continue
            del self.event_waits[run_id]
            if run.step_records.get(waiter.step) == waiter.record:
                run.step_records[waiter.step] = resolved
                if run.parked is not None and run.parked.step == waiter.step:
                    self._resume(run)


def run_inline(workflow: WorkflowDef | str, input: Any = None, *, registry: Registry | None = None, max_attempts: int | None = None) -> Any:
    """Run ``workflow`` with ``input`` in this greenlet and return its output.

    A failed or canceled run raises its error itself. Child workflows and
    event subscribers resolve in ``registry`` (default: the workflow's own
    registry, else the default one) and run inline too. No worker, no Redis."""
    if registry is None and not isinstance(workflow, str):
        registry = workflow.registry
    return InlineRunner(registry).run(workflow, input, max_attempts=max_attempts).result()
