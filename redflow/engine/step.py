"""Durable steps: ``ctx.step.run``, ``run_workflow``, ``emit_workflow``, ``emit_event``,
``schedule_event`` (and the durable waits of :mod:`redflow.engine.waits` and
:mod:`redflow.engine.signal_waits`).

A step's outcome is stored in the run's steps hash; when a retried run
reaches a step that already succeeded, the stored output is returned and the
function is not called again. The step cache comes with the run when the
attempt starts, so a replayed step costs no Redis round trip; a new one's
record is sent behind (engine/step_records.py): with the settle, or at the
attempt's next wait, its reply heeded at the next step.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import gevent
from gevent import GreenletExit

from redflow.core.errors import (
    CorruptDataError,
    OutputSerializationError,
    RedflowError,
    SerializationError,
    TimeoutError,
)
from redflow.core.idempotency import step_event_idempotency_key, step_workflow_idempotency_key
from redflow.core.models import STEP_SUCCEEDED, StepField, Unreadable, step_record, step_seq
from redflow.core.retry import RetryPolicy
from redflow.core.signals import check_signal_name, signal_step_name
from redflow.core.tags import validate_tags
from redflow.engine import signal_waits, step_retry, waits
from redflow.engine.interrupts import RunInterrupt
from redflow.engine.step_host import RunningStep, StepHost
from redflow.store.payloads import Blobs

if TYPE_CHECKING:
    from redflow.core.run_state import RunState
    from redflow.core.workflow_def import WorkflowDef

DEFAULT_RESULT_TIMEOUT_S = 30.0


class _StepTimeout(BaseException):
    """Thrown into a step by its gevent timer; private so user code cannot catch it as Exception."""


class _Corrupt:
    """Stands for a cached step record that does not decode."""

    def __init__(self, raw: str, reason: str) -> None:
        self.raw = raw
        self.reason = reason


def load_step_cache(raw_steps: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """Decode the steps hash: records by name (in the object form: the asyncio
    package's array records are translated), and the highest seq seen."""
    cache: dict[str, Any] = {}
    max_seq = 0
    for name, raw in raw_steps.items():
        record = step_record(raw, f"step {name!r}")
        if isinstance(record, Unreadable):
            cache[name] = _Corrupt(raw, record.reason)
            continue
        cache[name] = record
        max_seq = max(max_seq, step_seq(record) or 0)
    return cache, max_seq


@lru_cache(maxsize=4096)
def _code_wants_signal(code: Any, is_method: bool, defaults: int) -> bool:
    required = code.co_argcount - (1 if is_method else 0) - defaults
    return required >= 1 or bool(code.co_flags & inspect.CO_VARARGS)


def _wants_signal(fn: Callable[..., Any]) -> bool:
    """Step functions take no argument or one (the run's cancel signal). A plain function or
    method is read from its code object (cached: ``lambda i=i: ...`` in a loop is the usual
    step, and ``inspect.signature`` per step was a quarter of a 5-step run's worker CPU);
    a wrapper (``__wrapped__``), a partial or a callable object through ``inspect``."""
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is not None and not hasattr(func, "__wrapped__"):
        return _code_wants_signal(code, func is not fn, len(getattr(func, "__defaults__", None) or ()))
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.kind in kinds and p.default is inspect.Parameter.empty]
    return bool(required) or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


class StepApi:
    """``ctx.step``: durable steps of one attempt.

    ``begin``, ``replay``, ``seq_of`` and ``execute`` are how a step is
    recorded (the :class:`~redflow.engine.step_host.Recorder` interface the
    durable waits build on); a handler calls the steps below them."""

    def __init__(
        self, host: StepHost, cache: dict[str, Any], max_seq: int, *, stored: Mapping[str, str] | None = None, blobs: Blobs | None = None
    ) -> None:
        self._host = host
        self._cache = cache
        self._max_seq = max_seq
        self._used: set[str] = set()
        self._signal_waits: dict[str, int] = {}  # signal name -> wait_for_signal calls so far
        #: The records as stored (the text a durable wait must find again), and the
        #: run's blobs their outputs refer to (read with them when the attempt started).
        self._stored: dict[str, str] = dict(stored or {})
        self._blobs: Blobs = blobs or {}

    # -- the core: one durable step ----------------------------------------
    def run(self, name: str, fn: Callable[..., Any], *, timeout: float | None = None, retry: RetryPolicy | None = None) -> Any:
        """Run ``fn`` once per run: its JSON output is stored, and returned
        from the store on a retried run. ``timeout`` in seconds (each try's).
        ``retry``: a failed call is tried again in this attempt, after the
        policy's wait, up to its ``max_attempts`` (``engine/step_retry.py``)."""
        step_retry.check(retry)
        record = self.begin(name)
        if record is not None and record.get(StepField.STATUS) == STEP_SUCCEEDED:
            return self.replay(name, record)
        if retry is None:
            return self.execute(name, self.seq_of(record), fn, timeout)
        return step_retry.run_with_retries(self, self._host, name, self.seq_of(record), fn, timeout, retry)

    def begin(self, name: str) -> dict[str, Any] | None:
        """Claim ``name`` for this run (unique names) and return its stored record, if any.
        A step that is to run (not a replay) first confirms the attempt still owns the run."""
        host = self._host
        host.raise_if_interrupted()
        if not isinstance(name, str) or not name:
            raise RedflowError("a step needs a non-empty name")
        if name in self._used:
            raise RedflowError(f"Duplicate step name {name!r} in workflow {host.info.workflow!r}. Step names must be unique within a run.")
        self._used.add(name)
        record = self._cache.get(name)
        if isinstance(record, _Corrupt):
            raise CorruptDataError(
                f"step {name!r} of run {host.run_id}: stored record does not decode ({record.reason}): {record.raw[:80]!r}"
            )
        if record is None or record.get(StepField.STATUS) != STEP_SUCCEEDED:
            host.confirm_owner()
        return record

    def replay(self, name: str, record: dict[str, Any]) -> Any:
        """The output a succeeded step stored (a ``@blob:`` reference is read from the
        run's blobs: :class:`MissingBlobError`, which fails the run, when it is not there)."""
        host = self._host
        return host.payloads.loads_stored(
            record.get(StepField.OUTPUT_JSON), self._blobs, run_id=host.run_id, field=f"step {name!r} outputJson"
        )

    def stored(self, name: str) -> str:
        """The record of ``name`` exactly as stored (read at the start, or written since)."""
        return self._stored[name]

    def seq_of(self, record: dict[str, Any] | None) -> int:
        """The step's seq: kept from its record (a step re-run after failure keeps it), else the next one."""
        seq = step_seq(record) if record is not None else None
        if seq is None:
            self._max_seq += 1
            return self._max_seq
        self._max_seq = max(self._max_seq, seq)
        return seq

    def execute(
        self,
        name: str,
        seq: int,
        fn: Callable[..., Any],
        timeout: float | None = None,
        *,
        started_at_ms: int | None = None,
        expected: str = "",
        tries: int = 0,
    ) -> Any:
        """Call ``fn`` as step ``name`` and record its output or error. ``expected``:
        the record the step must still hold (a durable wait); if something else
        resolved it meanwhile, that record's output is returned instead.
        ``tries``: which try this is, of a step with a retry policy (0: none)."""
        host = self._host
        running = RunningStep(name, seq, host.now_ms() if started_at_ms is None else started_at_ms, host.info.attempt, host.step_form)
        host.running_steps[name] = running
        began = time.perf_counter()
        try:
            with host.step_scope(name):
                value = self._call(fn, name, timeout)
            try:
                output_json = host.payloads.dumps(value, what="output")
            except SerializationError as exc:
                raise OutputSerializationError(f"Step output is not JSON-serializable: {name}: {exc}") from exc
        except Exception as exc:
            host.running_steps.pop(name, None)
            self._save_failed(name, seq, running, exc, expected, tries)
            host.step_observed(name, "failed", time.perf_counter() - began)
            raise
        except BaseException as exc:
            host.running_steps.pop(name, None)
            if not isinstance(exc, (RunInterrupt, GreenletExit)):  # e.g. KeyboardInterrupt, gevent.Timeout
                self._save_failed(name, seq, running, exc, expected, tries)
            raise  # the engine's interrupt (the attempt is being stopped) is not a step failure
        host.running_steps.pop(name, None)
        output = host.payloads.stored(output_json)
        saved = host.step_form.succeeded(seq, host.info.attempt, running.started_at_ms, host.now_ms(), output.value, tries)
        found = host.save_step(name, saved, expected, blob=output.blob)
        if found is not None:  # resolved meanwhile (an event delivered): that outcome stands
            return self._resolved_meanwhile(name, found)
        self._cache[name] = {StepField.STATUS: STEP_SUCCEEDED, StepField.SEQ: seq, StepField.OUTPUT_JSON: output_json}
        self._stored[name] = saved
        host.step_observed(name, "succeeded", time.perf_counter() - began)
        return value

    def _resolved_meanwhile(self, name: str, found: str) -> Any:
        record = step_record(found, f"step {name!r}")
        if isinstance(record, dict) and record.get(StepField.STATUS) == STEP_SUCCEEDED:
            self._cache[name], self._stored[name] = record, found
            return self.replay(name, record)
        raise RedflowError(f"step {name!r} of run {self._host.run_id} was changed by another writer: {found[:80]!r}")

    def _save_failed(self, name: str, seq: int, running: RunningStep, exc: BaseException, expected: str = "", tries: int = 0) -> None:
        host = self._host
        error = host.payloads.stored(host.payloads.dumps_error(exc))
        saved = host.step_form.failed(seq, host.info.attempt, running.started_at_ms, host.now_ms(), error.value, tries)
        host.save_step(name, saved, expected, blob=error.blob)

    def _call(self, fn: Callable[..., Any], name: str, timeout: float | None) -> Any:
        args = (self._host.signal,) if _wants_signal(fn) else ()
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
        workflow: WorkflowDef | str,
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
        host = self._host
        key = self._child_key(name, workflow, idempotency_key)
        run_options["tags"] = self._child_tags(run_options.get("tags"))

        def start_and_wait() -> Any:
            handle = host.fence_children(
                lambda: host.client.run(workflow, input, idempotency_key=key, parent_run_id=host.run_id, **run_options)
            )
            return host.client.wait_for(handle.id, timeout=result_timeout, assist=self._assist_child).outcome()

        return self.run(name, start_and_wait, timeout=timeout)

    def emit_workflow(
        self,
        name: str,
        workflow: WorkflowDef | str,
        input: Any = None,
        *,
        queue: str | None = None,
        delay: float | None = None,
        run_at: float | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        tags: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Start a run of ``workflow`` once per run and do not wait for it: its id,
        the step's recorded output (a replay starts none). It is linked to this run
        (its ``parent_run_id``) but not canceled with it, and is filed under this
        run's tags (its own win). Options as for ``client.run``."""
        host = self._host
        if delay is not None and run_at is not None:
            raise RedflowError("give delay= or run_at=, not both")
        options: dict[str, Any] = {
            "queue": queue, "max_attempts": max_attempts, "priority": priority, "tags": self._child_tags(tags),
            "idempotency_key": self._child_key(name, workflow, idempotency_key),
        }  # fmt: skip

        def start() -> str:
            when_s = run_at if delay is None else host.now_ms() / 1000 + delay
            return host.emit_run(workflow, input, {**options, "available_at_ms": 0 if when_s is None else int(when_s * 1000)})

        run_id: str = self.run(name, start, timeout=timeout)
        return run_id

    def _child_key(self, name: str, workflow: WorkflowDef | str, idempotency_key: str | None) -> str:
        """The idempotency key of the run step ``name`` starts: the same on every replay."""
        child_name = workflow if isinstance(workflow, str) else workflow.name
        return idempotency_key or step_workflow_idempotency_key(self._host.run_id, name, child_name)

    def _child_tags(self, tags: Mapping[str, str] | None) -> dict[str, str] | None:
        """A run a step starts is filed under its parent's tags (its own win)."""
        return validate_tags({**self._host.info.tags, **validate_tags(tags)}) or None

    def _assist_child(self, state: RunState) -> bool:
        if state.status != "queued":
            return False
        return self._host.run_child_inline(state.queue, state.run_id)

    def emit_event(
        self, name: str, event: str, payload: Any = None, *, idempotency_key: str | None = None, timeout: float | None = None
    ) -> list[str]:
        """Emit ``event`` once per run; returns the ids of the runs it started."""
        key = idempotency_key or step_event_idempotency_key(self._host.run_id, name, event)
        run_ids: list[str] = self.run(name, lambda: self._host.client.emit_event(event, payload, idempotency_key=key), timeout=timeout)
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
        key = idempotency_key or step_event_idempotency_key(self._host.run_id, name, event)
        client = self._host.client
        run_ids: list[str] = self.run(name, lambda: client.schedule_event(event, payload, at=at, idempotency_key=key), timeout=timeout)
        return run_ids

    # -- durable waits (redflow/engine/waits.py) ----------------------------------
    def sleep(self, name: str, duration: float | timedelta) -> None:
        """Give the slot back for ``duration`` (seconds or a timedelta); the run resumes after it."""
        waits.sleep(self, self._host, name, duration)

    def sleep_until(self, name: str, when: float | datetime) -> None:
        """Give the slot back until ``when`` (unix seconds or a datetime); a time already past replays as done."""
        waits.sleep_until(self, self._host, name, when)

    def wait_for_event(self, name: str, event: str, match: dict[str, Any] | None = None, timeout: float | timedelta | None = None) -> Any:
        """Give the slot back until ``event`` is emitted with a payload containing every top-level
        item of ``match``: returns the payload, or ``None`` after ``timeout`` seconds."""
        return waits.wait_for_event(self, self._host, name, event, match, timeout)

    def wait_for_signal(self, name: str, timeout: float | timedelta | None = None, *, step: str | None = None) -> Any:
        """Give the slot back until a signal ``name`` sent to this run (``client.signal``) is
        there, also one sent before: returns its payload (the oldest not taken; one per
        wait), or ``None`` after ``timeout`` seconds. ``step``: the step's name (default
        ``signal:<name>``, then ``signal:<name>#2``... for later waits on the same name)."""
        check_signal_name(name)
        if step is None:
            nth = self._signal_waits[name] = self._signal_waits.get(name, 0) + 1
            step = signal_step_name(name, nth)
        return signal_waits.wait_for_signal(self, self._host, step, name, timeout)

    def run_workflows(self, name: str, workflow: WorkflowDef | str, inputs: Sequence[Any]) -> list[Any]:
        """Start one child run per input, give the slot back until all have ended, and return their outputs in input order."""
        return waits.run_workflows(self, self._host, name, workflow, inputs)

    def report_progress(self, value: Any) -> None:
        """``ctx.progress``: keep ``value`` (JSON) on the run, latest wins."""
        try:
            value_json = self._host.payloads.dumps(value)
        except SerializationError as exc:
            raise RedflowError(f"progress must be JSON-serializable: {exc}") from exc
        self._host.set_progress(value_json)
