"""Workflows of the durable-wait chaos tests (tests/chaos/test_waits.py).

Handlers and step functions count themselves in the side channel
(:mod:`tests.chaos.apps.side`), so a test can tell what ran how often
without trusting the engine's own records.
"""

from __future__ import annotations

import os

import gevent

from redflow import NonRetryableError, Registry, define_workflow

from .side import count_handler, count_step, step_token

registry = Registry()


@define_workflow("napper", registry=registry)
def napper(ctx):
    """Step a, a sleep of ``s`` seconds, step b; returns both tokens and who finished it."""
    count_handler(ctx)
    a = ctx.step.run("a", lambda: step_token(ctx, "a"))
    ctx.step.sleep("nap", ctx.input["s"])
    b = ctx.step.run("b", lambda: step_token(ctx, "b"))
    return {"a": a, "b": b, "pid": os.getpid(), "attempt": ctx.run.attempt}


@define_workflow("quick", registry=registry)
def quick(ctx):
    count_handler(ctx)
    return ctx.input


@define_workflow("approval", registry=registry)
def approval(ctx):
    count_handler(ctx)
    return ctx.step.wait_for_event("approval", "order.approved", match={"order": ctx.input["order"]}, timeout=ctx.input.get("timeout"))


@define_workflow("leaf", registry=registry)
def leaf(ctx):
    count_handler(ctx)
    if ctx.input.get("fail"):
        raise NonRetryableError(f"leaf {ctx.input['n']} refuses")
    return ctx.step.run("double", lambda: (count_step(ctx, "double"), ctx.input["n"] * 2)[1])


@define_workflow("fan", registry=registry, max_attempts=2)
def fan(ctx):
    """One ``leaf`` per input (those in ``fail`` fail); ``flaky``: the first attempt fails after the children ended."""
    count_handler(ctx)
    fail = ctx.input.get("fail", [])
    outputs = ctx.step.run_workflows("fan-out", "leaf", [{"n": n, "fail": n in fail} for n in range(ctx.input["count"])])
    if ctx.input.get("flaky") and ctx.run.attempt == 1:
        raise ConnectionError("the parent's first attempt fails after its children")
    return outputs


@define_workflow("slow_fan", registry=registry)
def slow_fan(ctx):
    """Step a; on the first execution only, a pause of ``hold_s`` seconds; then one ``leaf`` per ``count``."""
    first = count_handler(ctx) == 1
    ctx.step.run("a", lambda: step_token(ctx, "a"))
    if first:
        gevent.sleep(ctx.input["hold_s"])
    return ctx.step.run_workflows("fan-out", "leaf", [{"n": n} for n in range(ctx.input["count"])])


@define_workflow("holder", registry=registry)
def holder(ctx):
    """Holds its slot inside a step until canceled."""
    count_handler(ctx)
    ctx.step.run("hold", lambda signal: signal.wait(120))


@define_workflow("boss", registry=registry)
def boss(ctx):
    return ctx.step.run_workflows("team", "holder", [{"i": i} for i in range(ctx.input["count"])])
