"""``ctx.step.wait_for_signal``: a durable wait for a message addressed to this run.

Signals are buffered per run and name (``client.signal``,
store/signals.py) until a wait takes one: each wait takes the oldest of its
name, one per wait, whenever it was sent, also before the wait began. The
take is one script with the step's record (``take_signal.lua``): the signal
leaves the buffer as it becomes the step's output, so a replay (a retried or
resumed run, a worker killed after the take) returns the same payload from
the record and never takes a second. With none waiting, the run parks (its
slot freed) until a signal of the name wakes it, its timeout passes, or the
hourly look; a signal sent between the take and the park's settle makes the
settle wake the run instead of parking it (``park_run`` in waits.lua).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from redflow.core.errors import CorruptDataError
from redflow.core.models import WAIT_SIGNAL, Wait, step_record
from redflow.engine.waits import (
    ParkRequest,
    ParkRun,
    begin_wait,
    deadline_ms,
    duration_to_ms,
    look_again_at,
    started_at_ms_of,
    succeeded,
    waiting_record,
)
from redflow.store.requests import SignalTake

if TYPE_CHECKING:
    from redflow.engine.step_host import Recorder, StepHost

#: ``take_signal`` states that leave the step with its final record.
RESOLVED = ("taken", "timeout", "done")


def wait_for_signal(steps: Recorder, host: StepHost, step: str, name: str, timeout: float | timedelta | None = None) -> Any:
    """Return the payload of the oldest signal ``name`` sent to this run and
    not taken yet, parking the run until one comes; ``None`` once ``timeout``
    seconds (from the first time the step ran) have passed with none."""
    timeout_ms = None if timeout is None else duration_to_ms(timeout, "wait_for_signal timeout")
    record, wait = begin_wait(steps, host, step, WAIT_SIGNAL)
    if record is not None and succeeded(record):
        return steps.replay(step, record)
    now_ms, seq = host.now_ms(), steps.seq_of(record)
    if wait is None:
        wait = Wait(WAIT_SIGNAL, signal=name, timeout_at_ms=deadline_ms(now_ms, timeout_ms))
        waiting, started_at_ms = waiting_record(host, seq, now_ms, wait), now_ms
    else:  # a replay: the stored wait stands (its signal and its timeout)
        waiting, started_at_ms = steps.stored(step), started_at_ms_of(record, now_ms)
    signal = wait.signal or name
    before, after = host.step_form.succeeded_around(seq, host.info.attempt, started_at_ms, now_ms)  # in the waiting record's form
    looked = host.take_signal(SignalTake(step, signal, waiting, before, after, wait.timeout_at_ms, now_ms))
    if looked.state in RESOLVED:
        resolved = step_record(looked.current, f"step {step!r}")  # an object, or an array record (compat)
        if not isinstance(resolved, dict):
            raise CorruptDataError(f"step {step!r} of run {host.run_id}: its record does not decode ({resolved.reason})")
        return steps.replay(step, resolved)
    raise ParkRun(ParkRequest(WAIT_SIGNAL, step, waiting, look_again_at(now_ms, wait.timeout_at_ms), signal=signal))
