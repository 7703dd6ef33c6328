"""The workflows of :mod:`tests.chaos.apps.waits_app`, on a worker that SIGKILLs
itself right after writing the event waiter entry of a run named in the side
set ``die_after_register_key``: the worker dies between a wait's entry and
its park. Only worker subprocesses import this module (it patches redflow's
waiter index for the whole process)."""

from __future__ import annotations

import os
import signal
from typing import Any

from redflow.store import event_waiters

from .side import die_after_register_key, side
from .waits_app import registry

__all__ = ["registry"]

_register = event_waiters.register


def _register_then_maybe_die(*args: Any) -> None:
    _register(*args)
    scripts, waiter = args[-3], args[-1]
    if side().srem(die_after_register_key(scripts.keys.prefix), waiter.run_id):
        os.kill(os.getpid(), signal.SIGKILL)


event_waiters.register = _register_then_maybe_die
