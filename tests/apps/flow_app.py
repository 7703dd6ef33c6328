"""Workflows with flow control, run by worker subprocesses in tests/test_flow_control_fleet.py.

Each handler writes what it did to a side channel (keys of the same Redis
under ``side:``, named by the test in the input), never read by the engine:
the tests count starts, overlaps and order from there, not from the engine's
own bookkeeping.
"""

import time
import uuid
from typing import Any

import gevent

from redflow import Concurrency, RateLimit, Registry, define_workflow
from tests.apps.cli_app import side

registry = Registry()


def interval(ctx: Any) -> None:
    """Record the handler's start and end (unix s) under ``<side>:start|end``, field ``<label>|<run id>|<execution>``."""
    field = f"{ctx.input.get('label', '')}|{ctx.run.id}|{uuid.uuid4().hex}"
    side().hset(ctx.input["side"] + ":start", field, repr(time.time()))
    gevent.sleep(ctx.input.get("sleep", 0.0))
    side().hset(ctx.input["side"] + ":end", field, repr(time.time()))


@define_workflow("limited", registry=registry, concurrency=[Concurrency(limit=5)])
def limited(ctx):
    interval(ctx)


@define_workflow("per-customer", registry=registry, concurrency=[Concurrency(limit=2, key=lambda input: input["label"])])
def per_customer(ctx):
    interval(ctx)


@define_workflow("rated", registry=registry, rate_limit=RateLimit(limit=20, period=1.0))
def rated(ctx):
    side().rpush(ctx.input["side"] + ":starts", repr(time.time()))


@define_workflow("prioritized", registry=registry)
def prioritized(ctx):
    side().rpush(ctx.input["side"] + ":order", ctx.input["label"])
    gevent.sleep(ctx.input.get("sleep", 0.0))


@define_workflow("slow-limited", registry=registry, concurrency=[Concurrency(limit=3)])
def slow_limited(ctx):
    interval(ctx)
