"""Workflows the CLI and load tests run in worker subprocesses.

Side effects go to Redis (``REDIS_URL``) so the test process can count
handler executions independently of the engine's own bookkeeping.
"""

import os

import gevent
import redis

from redflow import Registry, define_workflow

registry = Registry()
_side: redis.Redis | None = None


def side() -> redis.Redis:
    global _side
    if _side is None:
        _side = redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True, max_connections=1000)
    return _side


@define_workflow("count", registry=registry)
def count(ctx):
    """Two steps; the handler body counts its executions per run."""
    side().hincrby(ctx.input["key"], ctx.run.id, 1)
    first = ctx.step.run("first", lambda: ctx.input.get("n", 0))
    return ctx.step.run("second", lambda: first + 1)


@define_workflow("sleep", registry=registry)
def sleep(ctx):
    gevent.sleep(ctx.input["s"])
    side().hincrby(ctx.input["key"], ctx.run.id, 1)
    return "slept"
