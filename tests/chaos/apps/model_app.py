"""Workflows of the cross-feature model test (tests/chaos/test_cross_features.py).

One workflow per feature the model mixes: a concurrency limit, a rate limit,
a durable sleep, event waits (fed by ``emit_event`` or ``schedule_event``),
fan-out with children kept briefly by retention, and retries. Nothing here
counts itself: the model judges everything from what Redis holds (step
records, run fields, indexes), read with Redis's own clock.
"""

from __future__ import annotations

import gevent

from redflow import Concurrency, RateLimit, Registry, Retention, define_workflow

registry = Registry()

CAPPED_LIMIT = 2
RATE_LIMIT, RATE_PERIOD_S = 3, 1.0
#: Children are deleted by retention one second after they end, unless their parent still needs them.
CHILD_RETENTION = Retention(succeeded=1.0, failed=1.0, canceled=1.0)


def _nap(seconds: float) -> float:
    gevent.sleep(seconds)
    return seconds


@define_workflow("capped", registry=registry, concurrency=[Concurrency(limit=CAPPED_LIMIT)])
def capped(ctx):
    """At most CAPPED_LIMIT running at once, across every worker."""
    return ctx.step.run("work", lambda: _nap(ctx.input["nap"]))


@define_workflow("rated", registry=registry, max_attempts=2, rate_limit=RateLimit(limit=RATE_LIMIT, period=RATE_PERIOD_S))
def rated(ctx):
    """At most RATE_LIMIT starts per RATE_PERIOD_S; ``fail``: the first attempt fails (its retry is a start too)."""
    if ctx.input.get("fail") and ctx.run.attempt == 1:
        raise ConnectionError("the first attempt fails on purpose")
    return ctx.run.attempt


@define_workflow("sleeper", registry=registry)
def sleeper(ctx):
    a = ctx.step.run("a", lambda: 1)
    ctx.step.sleep("nap", ctx.input["s"])
    return ctx.step.run("b", lambda: a + 1)


@define_workflow("waiter", registry=registry)
def waiter(ctx):
    """Waits ``n`` times in a row for ``event`` with this run's key: the payloads (or None after a timeout)."""
    event, key, timeout = ctx.input["event"], ctx.input["k"], ctx.input["timeout"]
    return [ctx.step.wait_for_event(f"{event}-{i}", event, match={"k": key}, timeout=timeout) for i in range(ctx.input["n"])]


@define_workflow("parent", registry=registry, max_attempts=2)
def parent(ctx):
    """A step, some work outside any step (``prep`` seconds), then one ``child`` per input;
    ``flaky``: the first attempt fails after the children ended."""
    ctx.step.run("plan", lambda: len(ctx.input["kids"]))
    _nap(ctx.input["prep"])
    outputs = ctx.step.run_workflows("kids", "child", ctx.input["kids"])
    if ctx.input.get("flaky") and ctx.run.attempt == 1:
        raise ConnectionError("the parent's first attempt fails after its children")
    return outputs


@define_workflow("child", registry=registry, retention=CHILD_RETENTION)
def child(ctx):
    """A step of ``nap`` seconds, then (``sleep``) a durable sleep."""
    done = ctx.step.run("work", lambda: _nap(ctx.input["nap"]))
    if ctx.input.get("sleep"):
        ctx.step.sleep("rest", ctx.input["sleep"])
    return done
