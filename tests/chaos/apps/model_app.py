"""Workflows of the cross-feature model test (tests/chaos/test_cross_features.py).

One workflow per feature the model mixes: a concurrency limit, a rate limit,
a durable sleep, event waits (fed by ``emit_event`` or ``schedule_event``),
fan-out with children kept briefly by retention, retries; signal waits,
output streams, ``emit_workflow`` and the runs of schedules (issue 31). Nothing here
counts itself: the model judges everything from what Redis holds (step
records, run fields, indexes), read with Redis's own clock.
"""

from __future__ import annotations

import gevent

from redflow import Concurrency, RateLimit, Registry, Retention, define_workflow

from .late_advance import delay_tick_advance

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


# -- issue 31: signals, streams, emit_workflow and schedules in the model -----------------------


@define_workflow("listener", registry=registry)
def listener(ctx):
    """One ``wait_for_signal`` per name of ``waits`` (several of one name, in that order), no
    timeout: the model sends each one; returns the payloads taken."""
    return [ctx.step.wait_for_signal(name) for name in ctx.input["waits"]]


@define_workflow("streamer", registry=registry, max_attempts=2)
def streamer(ctx):
    """``n`` items ``{"i", "attempt"}``, ``nap`` s apart, a durable sleep before item ``rest_at``
    (if any); ``flaky``: the first attempt fails after its items (the retry streams again)."""
    for i in range(ctx.input["n"]):
        if i == ctx.input.get("rest_at"):
            ctx.step.sleep("rest", ctx.input["rest"])
        ctx.stream({"i": i, "attempt": ctx.run.attempt})
        _nap(ctx.input["nap"])
    if ctx.input.get("flaky") and ctx.run.attempt == 1:
        raise ConnectionError("the streamer's first attempt fails after its items")
    return ctx.input["n"]


@define_workflow("emitter", registry=registry, max_attempts=2)
def emitter(ctx):
    """``emit_workflow`` steps ``e1`` (and ``e2`` if ``two``), work between them; ``flaky``: the
    first attempt fails after them (the retry replays both ids and starts no run)."""
    ids = [ctx.step.emit_workflow("e1", "emitted", {"parent": ctx.run.id, "step": "e1"})]
    _nap(ctx.input["nap"])
    if ctx.input.get("two"):
        ids.append(ctx.step.emit_workflow("e2", "emitted", {"parent": ctx.run.id, "step": "e2"}))
    if ctx.input.get("flaky") and ctx.run.attempt == 1:
        raise ConnectionError("the emitter's first attempt fails after its emits")
    return ids


@define_workflow("emitted", registry=registry)
def emitted(ctx):
    """What an emitter starts: its input names the parent and the step."""
    return ctx.input


@define_workflow("stamp", registry=registry)
def stamp(ctx):
    """What the model's schedules start."""
    return ctx.run.id


#: Seconds a cron leader running this app waits between a tick's run and the tick's advance,
#: so that a leader kill often lands inside that window (tests/chaos/apps/late_advance.py).
ADVANCE_DELAY_S = 0.2
delay_tick_advance(ADVANCE_DELAY_S)
