"""Signals to one run (``client.signal``, ``ctx.step.wait_for_signal``): their bounds and names.

A signal is buffered per run and name until a wait of that name takes it,
one per wait, oldest first (store/lua/send_signal.lua, take_signal.lua).
The buffer is bounded so that a sender cannot fill Redis through one run:
past a bound, ``client.signal`` raises :class:`SignalBufferFullError` and
stores nothing. No I/O here.
"""

from __future__ import annotations

from typing import Final

from redflow.core.errors import RedflowError

#: How many signals of one name may wait, not taken yet, in one run.
MAX_WAITING_PER_NAME: Final = 1_000
#: How many signals of all names may wait in one run.
MAX_WAITING_PER_RUN: Final = 10_000
#: The longest signal name (names are part of field names in the buffer).
MAX_NAME_CHARS: Final = 200


def check_signal_name(name: object) -> str:
    """``name`` if it can name a signal: a non-empty string of at most MAX_NAME_CHARS characters."""
    if not isinstance(name, str) or not name:
        raise RedflowError(f"a signal needs a non-empty name (a string), got {name!r}")
    if len(name) > MAX_NAME_CHARS:
        raise RedflowError(f"a signal name has at most {MAX_NAME_CHARS} characters, got {len(name)}")
    return name


def signal_step_name(name: str, nth: int) -> str:
    """The step of the ``nth`` ``wait_for_signal(name)`` of a run (1-based): ``signal:<name>``,
    then ``signal:<name>#2``, ``#3``... A replay counts the same way, so each wait finds its record."""
    return f"signal:{name}" if nth == 1 else f"signal:{name}#{nth}"
