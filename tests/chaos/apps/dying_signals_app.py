"""The workflows of :mod:`tests.chaos.apps.signals_app`, on a worker that SIGKILLs
itself at the worst moments for a run named in the side set
``die_after_register_key``: right after its signal wait took a signal (the
take and the step's record are one script, then the handler never goes on),
and right after its ``emit_workflow`` started the run and before the step's
record. Only worker subprocesses import this module (it patches redflow for
the whole process)."""

from __future__ import annotations

import os
import signal
from typing import Any

from redflow.engine.fence import Fence
from redflow.store.scripts import Scripts

from .side import die_after_register_key, side
from .signals_app import registry

__all__ = ["registry"]

_take_signal = Scripts.take_signal
_save_step = Fence.save_step


def _die_if_named(prefix: str, run_id: str) -> None:
    if side().srem(die_after_register_key(prefix), run_id):
        os.kill(os.getpid(), signal.SIGKILL)


def _take_then_maybe_die(self: Scripts, **kwargs: Any) -> Any:
    looked = _take_signal(self, **kwargs)
    if looked.state == "taken":
        _die_if_named(self.keys.prefix, kwargs["run_id"])
    return looked


def _die_before_the_emits_record(self: Fence, name: str, step_json: str, *args: Any, **kwargs: Any) -> str | None:
    if name == "notify":
        _die_if_named(self.store.keys.prefix, self.lease.run_id)
    return _save_step(self, name, step_json, *args, **kwargs)


Scripts.take_signal = _take_then_maybe_die  # type: ignore[method-assign]
Fence.save_step = _die_before_the_emits_record  # type: ignore[method-assign]
