"""Workflows of the signal and emit_workflow chaos tests (tests/chaos/test_signals.py).

Handlers count themselves in the side channel (:mod:`tests.chaos.apps.side`),
so a test can tell what ran how often without trusting the engine's records.
"""

from __future__ import annotations

from redflow import NonRetryableError, Registry, define_workflow

from .side import count_handler

registry = Registry()


@define_workflow("approver", registry=registry)
def approver(ctx):
    """Two waits for signal ``approve``; returns both payloads."""
    count_handler(ctx)
    return [ctx.step.wait_for_signal("approve", timeout=120) for _ in range(2)]


@define_workflow("notify", registry=registry, max_attempts=1)
def notify(ctx):
    """Counts itself and fails at once (no retry): a run whose end comes before its parent's replay."""
    count_handler(ctx)
    raise NonRetryableError("the mail server said no")


@define_workflow("emitter", registry=registry)
def emitter(ctx):
    """Emits one ``notify`` and returns its id."""
    count_handler(ctx)
    return ctx.step.emit_workflow("notify", "notify", {"to": ctx.input["to"]})
