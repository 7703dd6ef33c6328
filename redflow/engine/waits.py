"""Durable waits: ``ctx.step.sleep``, ``sleep_until``, ``wait_for_event`` and ``run_workflows``
(and the park of ``wait_for_signal``, engine/signal_waits.py).

A wait that is not over parks the run instead of holding its slot: the step
raises :class:`ParkRun`, the attempt ends ``Parked``, and its settle
(``settle_run.lua`` with ``waits.lua``) stores the step's ``running`` record
with the wait in it and moves the run to ``scheduled`` until its wake time,
releasing the lease. When it is due (the promoter), or woken early (its
event delivered, its last child ended), the run starts again as the same
attempt: the handler runs from the top, finished steps replay, and the
wait's step finds its record: over, it resolves; not over, it parks again.

A run parked with no due time would be one nothing ever looks at again, so
every parked run has one: a sleep its wake time, an event wait its timeout
or an hourly look (which also re-registers a lost index entry; a signal
wait likewise, though a signal wakes it at once), a wait for
children a look that backs off from 1 s to 5 min (the last child to end
wakes it at once; the look covers a child ended by another client's worker).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from redflow.core import codec
from redflow.core.errors import RedflowError, RunNotFoundError, SerializationError
from redflow.core.models import (
    STEP_SUCCEEDED,
    WAIT_CHILDREN,
    WAIT_EVENT,
    WAIT_SIGNAL,
    WAIT_SLEEP,
    EventWaiter,
    StepField,
    Wait,
)

if TYPE_CHECKING:
    from redflow.core.run_state import RunState
    from redflow.core.workflow_def import WorkflowDef
    from redflow.engine.step_host import Recorder, StepHost

#: An event or signal wait with no timeout (or a far one) is looked at again this often.
EVENT_RECHECK_MS = 3_600_000
CHILDREN_RECHECK_MIN_MS = 1_000
CHILDREN_RECHECK_MAX_MS = 300_000


@dataclass(slots=True)
class ParkRequest:
    """What a parking step asks of the settle: the wait's step and record, its
    wake time (Redis ms) and, for children, those seen running and ended; for a
    signal, its name (a signal sent meanwhile wakes the run at once)."""

    reason: str
    step: str
    record: str
    wake_at_ms: int
    running: tuple[str, ...] = ()
    ended: tuple[str, ...] = ()
    signal: str = ""

    def settle_args(self) -> list[str]:
        """The wait as ``settle_run`` takes it (``park_run`` in waits.lua)."""
        args = [self.reason, self.step, self.record, str(self.wake_at_ms)]
        if self.reason == WAIT_CHILDREN:
            args += [str(len(self.running)), *self.running, *self.ended]
        elif self.reason == WAIT_SIGNAL:
            args.append(self.signal)
        return args


class ParkRun(BaseException):
    """Raised by a wait step that is not over: the attempt ends ``Parked``. Not an
    ``Exception``, so that a handler's ``except Exception:`` cannot swallow it."""

    def __init__(self, request: ParkRequest) -> None:
        super().__init__(f"parked in step {request.step!r} ({request.reason})")
        self.request = request


# -- the steps -------------------------------------------------------------------


def sleep(steps: Recorder, host: StepHost, name: str, duration: float | timedelta) -> None:
    """Park the run for ``duration`` (seconds or a timedelta), measured from the
    first time the step runs: a resumed run keeps the wake time it stored."""
    duration_ms = duration_to_ms(duration, "sleep")
    _sleep(steps, host, name, lambda now_ms: now_ms + duration_ms)


def sleep_until(steps: Recorder, host: StepHost, name: str, when: float | datetime) -> None:
    """Park the run until ``when`` (unix seconds, or a datetime; a naive one is local time)."""
    at_ms = _unix_ms(when)
    _sleep(steps, host, name, lambda now_ms: at_ms)


def _sleep(steps: Recorder, host: StepHost, name: str, wake_at_of: Callable[[int], int]) -> None:
    record, wait = begin_wait(steps, host, name, WAIT_SLEEP)
    if succeeded(record):
        return
    now_ms, seq = host.now_ms(), steps.seq_of(record)
    wake_at_ms = wait.wake_at_ms if wait is not None and wait.wake_at_ms is not None else int(wake_at_of(now_ms))
    if wake_at_ms <= now_ms:  # over (or never started): done
        steps.execute(name, seq, _nothing, started_at_ms=started_at_ms_of(record, now_ms))
        return
    waiting = steps.stored(name) if wait is not None else waiting_record(host, seq, now_ms, Wait(WAIT_SLEEP, wake_at_ms=wake_at_ms))
    raise ParkRun(ParkRequest(WAIT_SLEEP, name, waiting, wake_at_ms))


def wait_for_event(
    steps: Recorder, host: StepHost, name: str, event: str, match: dict[str, Any] | None = None, timeout: float | timedelta | None = None
) -> Any:
    """Park the run until ``event`` is emitted with a payload that contains every
    top-level item of ``match``; return the payload, or ``None`` after
    ``timeout`` seconds. An event emitted before the step first ran does not count."""
    if not isinstance(event, str) or not event:
        raise RedflowError("wait_for_event needs a non-empty event name")
    match = _checked_match(match)
    timeout_ms = None if timeout is None else duration_to_ms(timeout, "wait_for_event timeout")
    record, wait = begin_wait(steps, host, name, WAIT_EVENT)
    if record is not None and succeeded(record):
        return steps.replay(name, record)
    now_ms, seq = host.now_ms(), steps.seq_of(record)
    if wait is None:
        wait = Wait(WAIT_EVENT, event=event, match=match, timeout_at_ms=deadline_ms(now_ms, timeout_ms))
        waiting = waiting_record(host, seq, now_ms, wait)
        # Stored before its index entry exists: an event that finds the entry finds the record and
        # resolves it, even before the park's settle or with this worker killed before it.
        host.save_step(name, waiting)
    else:  # a replay: the stored wait stands
        waiting = steps.stored(name)
    waiter = EventWaiter(host.run_id, host.info.queue, name, wait.match or {}, waiting)
    if wait.timeout_at_ms is not None and wait.timeout_at_ms <= now_ms:
        value = steps.execute(name, seq, _nothing, started_at_ms=started_at_ms_of(record, now_ms), expected=waiting)
        host.forget_event_wait(wait.event or event, waiter)
        return value  # None, unless the event landed just before
    host.register_event_wait(wait.event or event, waiter)
    raise ParkRun(ParkRequest(WAIT_EVENT, name, waiting, look_again_at(now_ms, wait.timeout_at_ms)))


def run_workflows(steps: Recorder, host: StepHost, name: str, workflow: WorkflowDef | str, inputs: Sequence[Any]) -> list[Any]:
    """Start one child run of ``workflow`` per input (once per parent run), park
    until all have ended, and return their outputs in input order. A failed
    child raises ``RunFailedError`` naming it (the first in input order, once
    all have ended); a canceled one ``CanceledError``."""
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise RedflowError("run_workflows needs a list of inputs")
    record, wait = begin_wait(steps, host, name, WAIT_CHILDREN)
    if record is not None and succeeded(record):
        return list(steps.replay(name, record) or [])
    now_ms, seq = host.now_ms(), steps.seq_of(record)
    if wait is None:
        values = list(inputs)
        ids = tuple(host.fence_children(lambda: host.start_children(workflow, values, name)))
        waiting, started_at_ms = waiting_record(host, seq, now_ms, Wait(WAIT_CHILDREN, children=ids)), now_ms
    else:
        ids, waiting, started_at_ms = wait.children, steps.stored(name), started_at_ms_of(record, now_ms)
    states = host.read_states(ids)
    running = tuple(child for child, state in zip(ids, states) if state is not None and not state.is_terminal)
    if not running:
        return list(steps.execute(name, seq, lambda: _outputs(ids, states), started_at_ms=started_at_ms))
    ended = tuple(child for child, state in zip(ids, states) if state is not None and state.is_terminal)
    recheck_ms = min(CHILDREN_RECHECK_MAX_MS, max(CHILDREN_RECHECK_MIN_MS, now_ms - started_at_ms))
    raise ParkRun(ParkRequest(WAIT_CHILDREN, name, waiting, now_ms + recheck_ms, running, ended))


# -- helpers -------------------------------------------------------------------


def begin_wait(steps: Recorder, host: StepHost, name: str, kind: str) -> tuple[dict[str, Any] | None, Wait | None]:
    """The step's record and, if it holds one of this kind, its stored wait."""
    record = steps.begin(name)
    running = host.running_steps
    if running:
        raise RedflowError(f"step {name!r}: a durable wait cannot run inside another step ({', '.join(running)})")
    wait = Wait.of_record(record)
    return record, wait if wait is not None and wait.kind == kind else None


def waiting_record(host: StepHost, seq: int, now_ms: int, wait: Wait) -> str:
    """The running record of a step that starts waiting, in the host's step form (objects, or arrays with compat)."""
    return host.step_form.waiting(seq, host.info.attempt, now_ms, wait)


def deadline_ms(now_ms: int, timeout_ms: int | None) -> int | None:
    """When a wait begun at ``now_ms`` with ``timeout_ms`` times out (None: never)."""
    return None if timeout_ms is None else now_ms + max(1, timeout_ms)


def look_again_at(now_ms: int, timeout_at_ms: int | None) -> int:
    """When a parked event or signal wait is looked at again: at its timeout, or within the hour."""
    recheck_at = now_ms + EVENT_RECHECK_MS
    return recheck_at if timeout_at_ms is None else min(timeout_at_ms, recheck_at)


def succeeded(record: dict[str, Any] | None) -> bool:
    return record is not None and record.get(StepField.STATUS) == STEP_SUCCEEDED


def started_at_ms_of(record: dict[str, Any] | None, default: int) -> int:
    started = record.get(StepField.STARTED_AT) if record is not None else None
    return started if isinstance(started, int) else default


def _outputs(ids: Sequence[str], states: Sequence[RunState | None]) -> list[Any]:
    """Outputs in input order; the first child that did not succeed raises what its end means."""
    outputs = []
    for child, state in zip(ids, states):
        if state is None:
            raise RunNotFoundError(child)
        outputs.append(state.outcome())
    return outputs


def _nothing() -> None:
    return None


def duration_to_ms(value: float | timedelta, what: str) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise RedflowError(f"{what} needs seconds >= 0 (a number or a timedelta), got {value!r}")
    return int(round(seconds * 1000))


def _unix_ms(when: float | datetime) -> int:
    seconds = when.timestamp() if isinstance(when, datetime) else when
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise RedflowError(f"sleep_until needs unix seconds or a datetime, got {when!r}")
    return int(round(seconds * 1000))


def _checked_match(match: Any) -> dict[str, Any] | None:
    if match is None:
        return None
    if not isinstance(match, dict) or not all(isinstance(key, str) for key in match):
        raise RedflowError(f"wait_for_event match must be a dict with string keys, got {match!r}")
    try:
        return dict(codec.loads(codec.dumps(match)))
    except SerializationError as exc:
        raise RedflowError(f"wait_for_event match must be JSON: {exc}") from exc
