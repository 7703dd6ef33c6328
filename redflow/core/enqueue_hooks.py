"""Hooks around every enqueue and event emission of every client (tracing: ``redflow.ops.observe.otel``).

One list of hooks for every enqueue (``store/enqueue.py``) and event
emission (``client.py``). No hook registered: an enqueue costs nothing more.
No I/O here: a hook is a context manager the enqueue runs inside.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack

#: ``hook(operation, name, fields)`` -> a context manager around enqueueing a run
#: (operation "enqueue", ``name`` its workflow) or emitting an event ("event"):
#: it may add fields to store on the run (a trace context) and is given the run
#: id. See :func:`add_enqueue_hook`.
EnqueueHook = Callable[[str, str, dict[str, str]], AbstractContextManager[Callable[[str], None]]]

#: The hooks registered, in order; empty costs nothing.
HOOKS: list[EnqueueHook] = []


def add_enqueue_hook(hook: EnqueueHook) -> None:
    """Wrap every enqueue and event emission of every client."""
    if hook not in HOOKS:
        HOOKS.append(hook)


def remove_enqueue_hook(hook: EnqueueHook) -> None:
    if hook in HOOKS:
        HOOKS.remove(hook)


def hooked(operation: str, name: str, start: Callable[[dict[str, str]], list[str]]) -> list[str]:
    """Run ``start`` (which enqueues, storing ``fields`` on its run) inside every hook."""
    with ExitStack() as scope:
        fields: dict[str, str] = {}
        noted = [scope.enter_context(hook(operation, name, fields)) for hook in list(HOOKS)]
        run_ids = start(fields)
        for note in noted:
            for run_id in run_ids:
                note(run_id)
        return run_ids
