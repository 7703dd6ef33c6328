"""Workflows the CLI and load tests run in worker subprocesses.

Side effects go to Redis (``REDIS_URL``) so the test process can count
handler executions independently of the engine's own bookkeeping.
"""

import os
from typing import Any

import gevent

from redflow import Registry, define_workflow
from redflow.store.connection import create_redis

registry = Registry()
_side: Any = None


def side() -> Any:
    """A client of the same Redis (or Redis Cluster) for side effects the test counts."""
    global _side
    if _side is None:
        _side = create_redis(os.environ["REDIS_URL"], max_connections=1000)
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
