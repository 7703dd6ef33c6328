"""Workflows for crashes, lost leases, restarts, graceful stops, cancellation and load.

Every handler and step function counts itself in the side channel
(:mod:`tests.chaos.apps.side`), and every step returns a token naming its
execution, so a test can check which execution's output the engine kept.
"""

from __future__ import annotations

import os
from typing import Any

import gevent

from redflow import Registry, define_workflow

from .side import count_handler, step_token

registry = Registry()


def _step(ctx, name: str, options: dict[str, Any], hold: bool) -> str:
    token = step_token(ctx, name)
    first_execution = token.split(":")[1] == "1"
    if hold and first_execution:
        gevent.sleep(options.get("hold_s", 60.0))
    elif options.get("nap_s"):
        gevent.sleep(options["nap_s"])
    return token


@define_workflow("journey", registry=registry)
def journey(ctx):
    """Steps a, b, c. ``hold``: "step" holds inside step b on its first execution,
    "between" holds in the handler between a and b on the first handler
    execution, each for ``hold_s`` seconds; ``nap_s`` sleeps in every step."""
    options = ctx.input or {}
    first_handler_execution = count_handler(ctx) == 1
    a = ctx.step.run("a", lambda: _step(ctx, "a", options, hold=False))
    if first_handler_execution and options.get("hold") == "between":
        gevent.sleep(options.get("hold_s", 60.0))
    b = ctx.step.run("b", lambda: _step(ctx, "b", options, hold=options.get("hold") == "step"))
    c = ctx.step.run("c", lambda: _step(ctx, "c", options, hold=False))
    return {"a": a, "b": b, "c": c, "pid": os.getpid()}


@define_workflow("pair", registry=registry)
def pair(ctx):
    """The two-step workflow of the load test: as cheap as a counted run can be."""
    count_handler(ctx)
    first = ctx.step.run("first", lambda: step_token(ctx, "first"))
    second = ctx.step.run("second", lambda: step_token(ctx, "second"))
    return {"first": first, "second": second}


@define_workflow("flaky", max_attempts=5, registry=registry)
def flaky(ctx):
    """Fails every attempt with a retryable error (so it sits scheduled between attempts)."""
    count_handler(ctx)
    raise ValueError(f"attempt {ctx.run.attempt} failed on purpose")
