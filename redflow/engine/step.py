"""Durable steps: ``ctx.step.run``, ``run_workflow``, ``emit_event``, ``schedule_event``
(and the durable waits of :mod:`redflow.engine.waits`).

A step's outcome is stored in the run's steps hash; when a retried run
reaches a step that already succeeded, the stored output is returned and the
function is not called again. The step cache comes with the run when the
attempt starts, so a replayed step costs no Redis round trip and a new one
costs one (its final record, which also reports a pending cancel).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import gevent
from gevent import GreenletExit

from redflow.core import codec
from redflow.core.errors import (
    CorruptDataError,
    OutputSerializationError,
    RedflowError,
    SerializationError,
    TimeoutError,
)
from redflow.core.keys import step_event_idempotency_key, step_workflow_idempotency_key
from redflow.core.models import STEP_SUCCEEDED, step_failed_json, step_seq, step_succeeded_json
from redflow.engine import waits
from redflow.engine.context import RunInterrupt

if TYPE_CHECKING:
    from redflow.core.models import EventWaiter
    from redflow.engine.context import CancelSignal, RunInfo
    from redflow.handle import RunState
    from redflow.registry import Workflow

DEFAULT_RESULT_TIMEOUT_S = 30.0

T = TypeVar("T")


class _StepTimeout(BaseException):
    """Thrown into a step by its gevent timer; private so user code cannot catch it as Exception."""


@dataclass(slots=True)
class RunningStep:
    """A step in progress, for the lease keeper's ``running`` marker."""

    name: str
    seq: int
    started_at: int
    marked: bool = False


class StepClient(Protocol):
    """What steps start runs and events with: a ``RedflowClient``, or the inline runner's stand-in."""

    def run(self, workflow: Workflow | str, input: Any = None, *, idempotency_key: str | None = None,
            max_attempts: int | None = None, parent_run_id: str | None = None,
            tags: Mapping[str, str] | None = None) -> Any: ...  # fmt: skip
    def wait_for(self, run_id: str, *, timeout: float = 30.0, assist: Any = None) -> Any: ...
    def emit_event(self, name: str, payload: Any = None, idempotency_key: str | None = None) -> list[str]: ...
    def schedule_event(self, name: str, payload: Any = None, at: float | None = None, idempotency_key: str | None = None) -> list[str]: ...
    def start_children(self, workflow: Workflow | str, inputs: Sequence[Any], *, parent_run_id: str, parent_queue: str,
                       step: str) -> list[str]: ...  # fmt: skip
    def read_states(self, run_ids: Sequence[str]) -> list[RunState | None]: ...
    def register_event_wait(self, event: str, waiter: EventWaiter) -> None: ...
    def forget_event_wait(self, event: str, waiter: EventWaiter) -> None: ...


class StepHost(Protocol):
    """The attempt a :class:`StepApi` works for: the worker's ``Attempt`` and
    the inline test runner's both implement it, so they cannot drift apart."""

    @property
    def run_id(self) -> str: ...
    @property
    def info(self) -> RunInfo: ...
    @property
    def signal(self) -> CancelSignal: ...
    @property
    def running_steps(self) -> MutableMapping[str, RunningStep]: ...
    @property
    def client(self) -> StepClient: ...
    def now_ms(self) -> int: ...
    def raise_if_interrupted(self) -> None: ...
    def confirm_owner(self) -> None: ...
    def fence_children(self, create: Callable[[], T]) -> T: ...
    def save_step(self, name: str, step_json: str, expected: str = "") -> str | None: ...
    def set_progress(self, value_json: str) -> None: ...
    def step_scope(self, name: str) -> AbstractContextManager[Any]: ...
    def step_observed(self, name: str, status: str, duration_s: float) -> None: ...
    def run_child_inline(self, queue: str, child_id: str) -> bool: ...


class _Corrupt:
    """Stands for a cached step record that is not valid JSON."""

    def __init__(self, raw: str) -> None:
        self.raw = raw


def load_step_cache(raw_steps: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """Decode the steps hash: records by name, and the highest seq seen."""
    cache: dict[str, Any] = {}
    max_seq = 0
    for name, raw in raw_steps.items():
        record = codec.try_loads(raw)
        if not isinstance(record, dict):
            cache[name] = _Corrupt(raw)
            continue
        cache[name] = record
        max_seq = max(max_seq, step_seq(record) or 0)
    return cache, max_seq


@lru_cache(maxsize=4096)
def _code_wants_signal(code: Any, is_method: bool) -> bool:
    positional = code.co_argcount - (1 if is_method else 0)
    return positional >= 1 or bool(code.co_flags & inspect.CO_VARARGS)


def _wants_signal(fn: Callable[..., Any]) -> bool:
    """Step functions take no argument or one (the run's cancel signal)."""
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is not None and not getattr(func, "__defaults__", None):
        return _code_wants_signal(code, func is not fn)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.kind in kinds and p.default is inspect.Parameter.empty]
    return bool(required) or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


class StepApi:
    """``ctx.step``: durable steps of one attempt."""

    def __init__(self, attempt: StepHost, cache: dict[str, Any], max_seq: int) -> None:
        self._attempt = attempt
        self._cache = cache
        self._max_seq = max_seq
        self._used: set[str] = set()

    # -- the core: one durable step ----------------------------------------
    def run(self, name: str, fn: Callable[..., Any], *, timeout: float | None = None) -> Any:
        """Run ``fn`` once per run: its JSON output is stored, and returned
        from the store on a retried run. ``timeout`` in seconds."""
        record = self._begin(name)
        if record is not None and record.get("status") == STEP_SUCCEEDED:
            return self._replay(name, record)
        return self._execute(name, self._seq_of(record), fn, timeout)

    def _begin(self, name: str) -> dict[str, Any] | None:
        """Claim ``name`` for this run (unique names) and return its stored record, if any."""
        attempt = self._attempt
        attempt.raise_if_interrupted()
        if not isinstance(name, str) or not name:
            raise RedflowError("a step needs a non-empty name")
        if name in self._used:
            raise RedflowError(
                f"Duplicate step name {name!r} in workflow {attempt.info.workflow!r}. Step names must be unique within a run."
            )
        self._used.add(name)
        record = self._cache.get(name)
        if isinstance(record, _Corrupt):
            raise CorruptDataError(f"step {name!r} of run {attempt.run_id}: stored record is not valid JSON: {record.raw[:80]!r}")
        if record is None or record.get("status") != STEP_SUCCEEDED:
            attempt.confirm_owner()  # a step that runs (not a replay): only while the run is still this attempt's
        return record

    @staticmethod
    def _replay(name: str, record: dict[str, Any]) -> Any:
        output_json = record.get("outputJson")
        return None if output_json is None else codec.loads(output_json, what=f"step {name!r} output")

    def _seq_of(self, record: dict[str, Any] | None) -> int:
        """The step's seq: kept from its record (a step re-run after failure keeps it), else the next one."""
        seq = step_seq(record) if record is not None else None
        if seq is None:
            self._max_seq += 1
            return self._max_seq
        self._max_seq = max(self._max_seq, seq)
        return seq

    def _execute(
        self, name: str, seq: int, fn: Callable[..., Any], timeout: float | None, *, started_at: int | None = None, expected: str = ""
    ) -> Any:
        """Call ``fn`` as step ``name`` and record its output or error. ``expected``:
        the record the step must still hold (a durable wait); if something else
        resolved it meanwhile, that record's output is returned instead."""
        attempt = self._attempt
        running = RunningStep(name, seq, attempt.now_ms() if started_at is None else started_at)
        attempt.running_steps[name] = running
        began = time.perf_counter()
        try:
            with attempt.step_scope(name):
                value = self._call(fn, name, timeout)
            try:
                output_json = codec.dumps(value, what="output")
            except SerializationError as exc:
                raise OutputSerializationError(f"Step output is not JSON-serializable: {name}: {exc}") from exc
        except Exception as exc:
            attempt.running_steps.pop(name, None)
            self._save_failed(name, seq, running, exc, expected)
            attempt.step_observed(name, "failed", time.perf_counter() - began)
            raise
        except BaseException as exc:
            attempt.running_steps.pop(name, None)
            if not isinstance(exc, (RunInterrupt, GreenletExit)):  # e.g. KeyboardInterrupt, gevent.Timeout
                self._save_failed(name, seq, running, exc, expected)
            raise  # the engine's interrupt (the attempt is being stopped) is not a step failure
        attempt.running_steps.pop(name, None)
        finished = attempt.now_ms()
        found = attempt.save_step(name, step_succeeded_json(seq, running.started_at, finished, output_json, attempt.info.attempt), expected)
        if found is not None:  # resolved meanwhile (an event delivered): that outcome stands
            record = codec.try_loads(found)
            if isinstance(record, dict) and record.get("status") == STEP_SUCCEEDED:
                self._cache[name] = record
                return self._replay(name, record)
            raise RedflowError(f"step {name!r} of run {attempt.run_id} was changed by another writer: {found[:80]!r}")
        self._cache[name] = {"status": STEP_SUCCEEDED, "seq": seq, "outputJson": output_json}
        attempt.step_observed(name, "succeeded", time.perf_counter() - began)
        return value

    def _save_failed(self, name: str, seq: int, running: RunningStep, exc: BaseException, expected: str = "") -> None:
        attempt = self._attempt
        error_json = codec.dumps_error(exc)
        attempt.save_step(name, step_failed_json(seq, running.started_at, attempt.now_ms(), error_json, attempt.info.attempt), expected)

    def _call(self, fn: Callable[..., Any], name: str, timeout: float | None) -> Any:
        args = (self._attempt.signal,) if _wants_signal(fn) else ()
        if not timeout or timeout <= 0:
            return fn(*args)
        marker = _StepTimeout()
        timer = gevent.Timeout(timeout, marker)
        timer.start()
        try:
            return fn(*args)
        except _StepTimeout as exc:
            if exc is not marker:
                raise
            raise TimeoutError(f"Step timed out: {name}") from None
        finally:
            timer.close()

    # -- steps built on run() ----------------------------------------------
    def run_workflow(
        self,
        name: str,
        workflow: Workflow | str,
        input: Any = None,
        *,
        timeout: float | None = None,
        result_timeout: float = DEFAULT_RESULT_TIMEOUT_S,
        idempotency_key: str | None = None,
        **run_options: Any,
    ) -> Any:
        """Start a child workflow run (once per parent run) and return its output.

        A child still queued on a queue this worker serves is run inline by
        this greenlet, so a worker with one slot cannot deadlock on its own
        child. A failed child raises ``RunFailedError``, a canceled one
        ``CanceledError``."""
        attempt = self._attempt
        child_name = workflow if isinstance(workflow, str) else workflow.name
        key = idempotency_key or step_workflow_idempotency_key(attempt.run_id, name, child_name)
        if attempt.info.tags:  # a child is filed under its parent's tags (its own win)
            run_options["tags"] = {**attempt.info.tags, **(run_options.get("tags") or {})}

        def start_and_wait() -> Any:
            handle = attempt.fence_children(
                lambda: attempt.client.run(workflow, input, idempotency_key=key, parent_run_id=attempt.run_id, **run_options)
            )
            return attempt.client.wait_for(handle.id, timeout=result_timeout, assist=self._assist_child).outcome()

        return self.run(name, start_and_wait, timeout=timeout)

    def _assist_child(self, state: RunState) -> bool:
        if state.status != "queued":
            return False
        return self._attempt.run_child_inline(state.queue, state.run_id)

    def emit_event(
        self, name: str, event: str, payload: Any = None, *, idempotency_key: str | None = None, timeout: float | None = None
    ) -> list[str]:
        """Emit ``event`` once per run; returns the ids of the runs it started."""
        key = idempotency_key or step_event_idempotency_key(self._attempt.run_id, name, event)
        run_ids: list[str] = self.run(name, lambda: self._attempt.client.emit_event(event, payload, idempotency_key=key), timeout=timeout)
        return run_ids

    def schedule_event(
        self,
        name: str,
        event: str,
        payload: Any = None,
        *,
        at: float,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> list[str]:
        """Schedule ``event`` for unix time ``at``, once per run."""
        key = idempotency_key or step_event_idempotency_key(self._attempt.run_id, name, event)
        client = self._attempt.client
        run_ids: list[str] = self.run(name, lambda: client.schedule_event(event, payload, at=at, idempotency_key=key), timeout=timeout)
        return run_ids

    # -- durable waits (redflow/engine/waits.py) ----------------------------------
    def sleep(self, name: str, duration: float | timedelta) -> None:
        """Give the slot back for ``duration`` (seconds or a timedelta); the run resumes after it."""
        waits.sleep(self, name, duration)

    def sleep_until(self, name: str, when: float | datetime) -> None:
        """Give the slot back until ``when`` (unix seconds or a datetime); a time already past replays as done."""
        waits.sleep_until(self, name, when)

    def wait_for_event(self, name: str, event: str, match: dict[str, Any] | None = None, timeout: float | timedelta | None = None) -> Any:
        """Give the slot back until ``event`` is emitted with a payload containing every top-level
        item of ``match``: returns the payload, or ``None`` after ``timeout`` seconds."""
        return waits.wait_for_event(self, name, event, match, timeout)

    def run_workflows(self, name: str, workflow: Workflow | str, inputs: Sequence[Any]) -> list[Any]:
        """Start one child run per input, give the slot back until all have ended, and return their outputs in input order."""
        return waits.run_workflows(self, name, workflow, inputs)

    def report_progress(self, value: Any) -> None:
        """``ctx.progress``: keep ``value`` (JSON) on the run, latest wins."""
        try:
            value_json = codec.dumps(value)
        except SerializationError as exc:
            raise RedflowError(f"progress must be JSON-serializable: {exc}") from exc
        self._attempt.set_progress(value_json)
