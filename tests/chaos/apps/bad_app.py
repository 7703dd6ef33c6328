"""Workflows that misbehave: non-JSON results, BaseExceptions, steps that never end, huge input.

The bad-input tests also feed these (and runs written by hand) corrupt
data; after each, the same worker process must still serve ``echo``.
"""

from __future__ import annotations

import hashlib
import os

import gevent
import gevent.event

from redflow import Registry, define_workflow

from .side import count_handler, step_token

registry = Registry()


@define_workflow("echo", registry=registry)
def echo(ctx):
    """The canary: proves the worker still serves, and shows what it was given."""
    count_handler(ctx)
    return {"input": ctx.input, "pid": os.getpid(), "attempt": ctx.run.attempt, "max_attempts": ctx.run.max_attempts}


@define_workflow("fails", max_attempts=3, registry=registry)
def fails(ctx):
    count_handler(ctx)
    raise ValueError("fails on purpose")


@define_workflow("stepper", max_attempts=3, registry=registry)
def stepper(ctx):
    """One step; the tests corrupt its stored record before it runs."""
    count_handler(ctx)
    return ctx.step.run("s", lambda: step_token(ctx, "s"))


def _not_json(kind: str):
    return {"set": {1, 2}, "object": object(), "bigint": 2**70, "bytes-key": {b"k": 1}}[kind]


@define_workflow("non-json-output", registry=registry)
def non_json_output(ctx):
    count_handler(ctx)
    return {"value": _not_json(ctx.input["kind"])}


@define_workflow("non-json-step", registry=registry)
def non_json_step(ctx):
    count_handler(ctx)
    return ctx.step.run("s", lambda: _not_json(ctx.input["kind"]))


def _raise(what: str) -> None:
    if what == "gevent.Timeout":
        with gevent.Timeout(0.05):
            gevent.sleep(5)
    errors = {
        "KeyboardInterrupt": KeyboardInterrupt("ctrl-c inside a handler greenlet"),
        "SystemExit": SystemExit(3),
        "GreenletExit": gevent.GreenletExit("a greenlet exit raised by hand"),
    }
    raise errors[what]


@define_workflow("raise-base", max_attempts=1, registry=registry)
def raise_base(ctx):
    count_handler(ctx)
    if ctx.input["where"] == "step":
        ctx.step.run("s", lambda: _raise(ctx.input["what"]))
    _raise(ctx.input["what"])


@define_workflow("stuck-step", max_attempts=1, registry=registry)
def stuck_step(ctx):
    """A step that would block forever, but has a timeout."""
    count_handler(ctx)
    forever = {"sleep": lambda: gevent.sleep(10**6), "event": lambda: gevent.event.Event().wait()}[ctx.input["how"]]
    return ctx.step.run("forever", forever, timeout=ctx.input.get("timeout_s", 0.5))


@define_workflow("measure", registry=registry)
def measure(ctx):
    blob = ctx.input["blob"]
    digest = ctx.step.run("digest", lambda: hashlib.sha256(blob.encode()).hexdigest())
    return {"length": len(blob), "sha256": digest}
