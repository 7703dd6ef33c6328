"""Workflows run inline: a workflow, its steps and its child runs in the
calling greenlet, with no worker and no Redis, for fast unit tests of a
handler's logic. Steps go through the engine's own ``StepApi``, so their
rules are the worker's: unique names, JSON outputs, timeouts, and replay of
succeeded steps when a retryable error makes the run try again.

Durable waits park inline runs as a worker parks them, against the
runner's own clock (local time plus what it was moved on): a sleep is
fast-forwarded (the clock jumps to its wake time, so no time passes and the
run goes on at once); a run waiting for an event resumes when
:meth:`InlineRunner.emit_event` (or another inline run) emits a matching
one, and its timeout passes when :meth:`InlineRunner.advance` moves the
clock on; a parent of ``run_workflows`` resumes when its last child ends.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from redflow.core import clock, codec
from redflow.core.errors import (
    CanceledError,
    RedflowError,
    RunFailedError,
    UnknownWorkflowError,
    error_to_json,
)
from redflow.core.idempotency import event_run_idempotency_key, step_workflows_idempotency_key
from redflow.core.models import STEP_SUCCEEDED, WAIT_CHILDREN, WAIT_SLEEP, EventWaiter, Step, StepField
from redflow.core.run_state import RunState
from redflow.core.streams import StreamWriter
from redflow.core.workflow_def import Registry, WorkflowDef, get_default_registry
from redflow.engine.context import WorkflowContext, call_on_failure
from redflow.engine.decide import Canceled, Failed, HandlerEnd, Parked, Retrying, Succeeded, decide, returned
from redflow.engine.interrupts import CancelSignal
from redflow.engine.run_info import RunInfo
from redflow.engine.step import StepApi, load_step_cache
from redflow.engine.step_host import RunningStep, StepHost
from redflow.engine.waits import ParkRequest
from redflow.store.payloads import PLAIN
from redflow.testing.inline_stream import InlineStream

if TYPE_CHECKING:
    from redflow.client import RedflowClient

log = logging.getLogger("redflow.testing")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class InlineEvent:
    """An event a run emitted (``at`` is ``None``) or scheduled."""

    name: str
    payload: Any
    at: float | None
    run_ids: tuple[str, ...]


@dataclass(eq=False)
class InlineRun:
    """One run executed by an :class:`InlineRunner`: what a worker would have stored."""

    id: str
    workflow: str
    input: Any
    max_attempts: int
    status: str = "queued"  # then succeeded | failed | canceled; "scheduled" runs never start
    output: Any = None
    error: BaseException | None = None
    attempt: int = 0
    step_records: dict[str, str] = field(default_factory=dict)  # name -> step JSON, as in Redis
    children: list[InlineRun] = field(default_factory=list)
    events: list[InlineEvent] = field(default_factory=list)
    progress: Any = None
    stream: InlineStream = field(default_factory=InlineStream)  # what ctx.stream wrote: StreamItem (id, value), .attempt
    parent_id: str | None = None
    #: While parked in a durable wait (status ``scheduled``): the wait.
    parked: ParkRequest | None = None

    @property
    def steps(self) -> list[Step]:
        """The run's steps as :class:`redflow.Step` objects, in seq order."""
        return sorted((Step.from_json(name, raw) for name, raw in self.step_records.items()), key=lambda s: (s.seq, s.name))

    def result(self) -> Any:
        """The output; for a failed or canceled run, its error itself is raised (with its traceback)."""
        if self.status == "succeeded":
            return self.output
        if self.error is not None:
            raise self.error
        if self.parked is not None:
            raise RedflowError(
                f"run {self.id} is parked ({self.parked.reason} in step {self.parked.step!r}): "
                "use InlineRunner.emit_event or InlineRunner.advance to resume it"
            )
        raise RedflowError(f"run {self.id} did not run (status {self.status!r})")

    def outcome(self) -> Any:
        """What a parent's ``step.run_workflow`` sees: the output, ``RunFailedError`` or ``CanceledError``."""
        if self.status == "failed" and self.error is not None:
            raise RunFailedError(self.id, error_to_json(self.error))
        if self.status == "canceled":
            raise CanceledError()
        return self.result()


class _InlineClient:
    """Stands in for the client inside inline runs (``ctx.client`` and the steps' client):
    runs started here run at once, in the calling greenlet."""

    def __init__(self, runner: InlineRunner, current: InlineRun) -> None:
        self._runner = runner
        self._current = current

    def run(
        self,
        workflow: WorkflowDef | str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        max_attempts: int | None = None,
        parent_run_id: str | None = None,
        **_options: Any,
    ) -> InlineRun:
        """``client.run``: ``queue``, ``delay`` and ``run_at`` are accepted and ignored (it runs now)."""
        return self._runner.start(workflow, input, idempotency_key=idempotency_key, max_attempts=max_attempts, parent=self._current)

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
        self.info = RunInfo(run.id, run.workflow, queue, run.attempt, run.max_attempts)
        self.signal = CancelSignal()  # nothing cancels an inline run from outside
        self.client = _InlineClient(runner, run)
        self.payloads = PLAIN
        self.running_steps: dict[str, RunningStep] = {}
        self._run = run

    def now_ms(self) -> int:
        return self._runner.now_ms()  # no Redis: the runner's clock

    def raise_if_interrupted(self) -> None:
        """Nothing interrupts an inline run: no lease to lose, no worker stopping."""

    def confirm_owner(self) -> None:
        """An inline run has no lease to lose."""

    def fence_children(self, create: Callable[[], T]) -> T:
        return create()  # nothing cancels an inline run from outside

    def save_step(self, name: str, step_json: str, expected: str = "") -> str | None:
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
                workflow, value, idempotency_key=step_workflows_idempotency_key(self.run_id, step, name, index), parent=self._run
            ).id
            for index, value in enumerate(inputs)
        ]

    def read_states(self, run_ids: Sequence[str]) -> list[RunState | None]:
        return [self._runner.state_of(run_id) for run_id in run_ids]

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

    Workflow names resolve in ``registry`` (default: the default registry).
    Idempotency keys work as with Redis: the same key gives the same run,
    unless that run failed or was canceled. Retries happen at once, without
    the backoff wait. Durable waits: see the module's docstring."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry if registry is not None else get_default_registry()
        self.runs: dict[str, InlineRun] = {}
        #: Runs parked in ``wait_for_event``: run id -> (event, entry).
        self.event_waits: dict[str, tuple[str, EventWaiter]] = {}
        self._keys: dict[tuple[str, str], str] = {}
        self._ahead_ms = 0
        self._scheduled_events: list[tuple[float, str, str]] = []  # (fire ms, event, payload JSON)

    def run(self, workflow: WorkflowDef | str, input: Any = None, *, max_attempts: int | None = None) -> InlineRun:
        """Run ``workflow`` to its end (or until it parks) and return the run (see ``InlineRun.result()``)."""
        return self.start(workflow, input, max_attempts=max_attempts)

    def now_ms(self) -> int:
        """The runner's clock: local time, plus every sleep fast-forwarded and every :meth:`advance`."""
        return clock.now_ms() + self._ahead_ms

    def event_time_ms(self) -> float:
        """The runner's clock to the microsecond: when a wait began, when a scheduled
        event fires (those a few microseconds apart are ordered, as on Redis)."""
        return time.time() * 1000.0 + self._ahead_ms

    def resolve(self, workflow: WorkflowDef | str) -> WorkflowDef:
        if not isinstance(workflow, str):
            return workflow
        found = self.registry.get(workflow) if isinstance(workflow, str) else None
        if found is None:
            raise UnknownWorkflowError(str(workflow or ""))
        return found

    def start(
        self,
        workflow: WorkflowDef | str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        max_attempts: int | None = None,
        parent: InlineRun | None = None,
        at: float | None = None,
    ) -> InlineRun:
        """Create a run (as ``client.run`` would: input validated, JSON only) and run it unless ``at`` is set."""
        wf = self.resolve(workflow)
        if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
            raise RedflowError("max_attempts must be an int >= 1")
        key = (wf.name, idempotency_key) if idempotency_key else None
        existing = self.runs.get(self._keys.get(key, "")) if key else None
        if existing is not None and existing.status not in ("failed", "canceled"):
            return existing
        input_json = PLAIN.input_json(wf.validate(input), wf.name)
        run = InlineRun(f"run_{uuid.uuid4()}", wf.name, codec.loads(input_json), max_attempts or wf.max_attempts)
        self.runs[run.id] = run
        if key:
            self._keys[key] = run.id
        if parent is not None:
            parent.children.append(run)
            run.parent_id = parent.id
        if at is not None:
            run.status = "scheduled"
        else:
            self._execute(wf, run)
        return run

    def _execute(self, wf: WorkflowDef, run: InlineRun, *, resuming: bool = False) -> None:
        """Attempts until success, a final failure, a cancel or a park; succeeded steps replay
        (decided as a worker decides: ``engine/decide.py``)."""
        value = wf.validate(run.input)  # the worker validates the stored input again
        while True:
            run.attempt += 0 if resuming else 1
            run.status, run.parked, resuming = "running", None, False
            host = _InlineAttempt(self, run, wf.queue)
            cache, max_seq = load_step_cache(run.step_records)
            ctx = WorkflowContext(
                input=value,
                run=host.info,
                step=StepApi(_as_step_host(host), cache, max_seq),
                signal=host.signal,
                client=cast("RedflowClient", host.client),
                stream=StreamWriter(run.stream.append_item, run.attempt, self.now_ms),
            )
            try:
                end = returned(wf.handler(ctx), PLAIN)
            except BaseException as exc:  # noqa: BLE001 - a handler's failure (even SystemExit), decided below
                end = HandlerEnd(error=exc)
            match decide(end, host.info, wf):
                case Parked(request):
                    if self._park(run, request):
                        resuming = True
                        continue
                    return
                case Retrying():
                    continue  # at once: inline runs do not wait the backoff
                case Canceled(error):
                    run.status, run.error = "canceled", error
                case Failed(error):
                    run.status, run.error = "failed", error
                    call_on_failure(wf, error, value, host.info)
                case Succeeded(output_json):
                    run.status, run.output = "succeeded", codec.loads(output_json)
            self._wake_parent(run)
            return

    def _park(self, run: InlineRun, request: ParkRequest) -> bool:
        """Park ``run`` as a worker's settle does; whether it goes on at once (a
        sleep is fast-forwarded: the clock jumps to its wake time)."""
        self._store_wait(run, request)
        run.stream.park()
        if request.reason == WAIT_SLEEP:
            self._ahead_ms += max(0, request.wake_at_ms - self.now_ms())
            return True
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
        if all(self.runs[i].status not in ("queued", "running", "scheduled") for i in parent.parked.running if i in self.runs):
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

    def advance(self, seconds: float) -> None:
        """Move the runner's clock on: scheduled events due by then reach their
        waiters, and runs whose wait is due (an event wait's timeout) resume."""
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
