"""Signals to inline runs (``InlineRunner.signal``, ``ctx.step.wait_for_signal``).

The inline runner keeps each run's signals as a worker's Redis does
(store/lua/send_signal.lua, take_signal.lua): a queue per run and name,
bounded as there, taken oldest first, one per wait, the take and the step's
record in one move.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableMapping
from typing import Any

from redflow.core import codec
from redflow.core.errors import SignalBufferFullError
from redflow.core.keys import TERMINAL_STATUSES
from redflow.core.models import STEP_SUCCEEDED
from redflow.core.signals import MAX_WAITING_PER_NAME, MAX_WAITING_PER_RUN, check_signal_name
from redflow.store.payloads import PLAIN
from redflow.store.replies import StepSaved
from redflow.store.requests import SignalTake


class SignalBuffers:
    """The signals sent to inline runs and not taken yet: run id -> name -> payload JSONs."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[str, deque[str]]] = {}

    def send(self, run_id: str, status: str, name: str, payload: Any) -> bool:
        """Keep one signal for a run in ``status`` (False, keeping nothing, once it
        ended); :class:`SignalBufferFullError` past the bounds a worker's Redis keeps."""
        payload_json = PLAIN.signal_json(payload, check_signal_name(name))
        if status in TERMINAL_STATUSES:
            return False
        names = self._runs.setdefault(run_id, {})
        queue = names.setdefault(name, deque())
        if len(queue) >= MAX_WAITING_PER_NAME or sum(map(len, names.values())) >= MAX_WAITING_PER_RUN:
            raise SignalBufferFullError(run_id, name, f"{MAX_WAITING_PER_NAME:,} of one name, {MAX_WAITING_PER_RUN:,} in all")
        queue.append(payload_json)
        return True

    def pending(self, run_id: str, name: str) -> bool:
        """Whether a signal ``name`` waits for run ``run_id``."""
        return bool(self._runs.get(run_id, {}).get(name))

    def waiting(self, run_id: str) -> dict[str, list[str]]:
        """The payload JSONs waiting for a run, by name, oldest first."""
        return {name: list(queue) for name, queue in self._runs.get(run_id, {}).items() if queue}

    def take(self, run_id: str, records: MutableMapping[str, str], take: SignalTake) -> StepSaved:
        """What ``take_signal.lua`` does, on an inline run's step records."""
        current = records.get(take.step)
        record = codec.try_loads(current)
        if current is not None and isinstance(record, dict) and record.get("status") == STEP_SUCCEEDED:
            return StepSaved("done", "", current)
        queue = self._runs.get(run_id, {}).get(take.signal)
        if queue:
            records[take.step] = take.before + codec.dumps(queue.popleft()) + take.after
            return StepSaved("taken", "", records[take.step])
        if take.timeout_at_ms is not None and take.now_ms >= take.timeout_at_ms:
            records[take.step] = take.before + '"null"' + take.after
            return StepSaved("timeout", "", records[take.step])
        records[take.step] = take.waiting
        return StepSaved("waiting", "")
