"""Sending a signal to one run (``client.signal``): buffered until a wait takes it.

The run's queue is read first (its keys and, on a cluster, its hash slot),
then ``send_signal.lua`` checks the run and stores the signal in one call
on the run's slot: a signal to a run that has ended, or to no run, stores
nothing. A run parked in a wait for that signal goes to ready in the same
call; a run about to park sees the signal in its settle and does not park
(``park_run`` in waits.lua). The waits' side is engine/signal_waits.py.
"""

from __future__ import annotations

from typing import Any

from redflow.core.errors import SignalBufferFullError
from redflow.core.signals import MAX_WAITING_PER_NAME, MAX_WAITING_PER_RUN, check_signal_name
from redflow.store.memory import raise_when_full
from redflow.store.port import Store

#: ``send_signal.lua`` replies of a signal that was stored.
STORED = ("woken", "stored")


def send(store: Store, run_id: str, name: str, payload: Any = None) -> bool:
    """Buffer signal ``name`` with ``payload`` (JSON) for run ``run_id``: True if it
    was stored, False if the run has ended or does not exist (nothing stored).
    :class:`SignalBufferFullError` when as many signals wait as a run keeps."""
    check_signal_name(name)
    payload_json = store.payloads.signal_json(payload, name)
    if not isinstance(run_id, str) or not run_id:
        return False
    queue = store.locator.queue_of(run_id)
    if queue is None:
        return False
    with raise_when_full("the signal was not stored"):
        outcome = store.scripts.send_signal(
            run_id=run_id,
            queue=queue,
            name=name,
            payload_json=payload_json,
            now_ms=store.now_ms(),
            bounds=(MAX_WAITING_PER_NAME, MAX_WAITING_PER_RUN),
        )
    if outcome == "full":
        raise SignalBufferFullError(run_id, name, f"{MAX_WAITING_PER_NAME:,} of one name, {MAX_WAITING_PER_RUN:,} in all")
    return outcome in STORED
