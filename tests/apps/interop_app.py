"""Our side of tests/test_interop_redflow019.py: the workflows that
tests/interop/redflow019_driver.py defines for the asyncio redflow 0.1.9,
with the same names, so that a run moves between the two workers.

Step executions are counted in Redis (``REDIS_URL``), by both sides alike.
"""

import gevent

from redflow import Registry, define_workflow
from tests.apps.cli_app import side

registry = Registry()


@define_workflow("interop-echo", registry=registry)
def echo(ctx):
    return {"echo": ctx.input, "by": "redflow-gevent"}


@define_workflow("interop-steps", registry=registry)
def with_steps(ctx):
    """Step "a" (its output is ``size`` bytes, counted in the hash ``calls``), then
    hang if told to (the test kills this worker), else finish."""

    def a():
        side().hincrby(ctx.input["calls"], "a", 1)
        return {"a": "z" * ctx.input["size"]}

    out = ctx.step.run("a", a)
    if ctx.input.get("hang") == "redflow-gevent":
        gevent.sleep(3600)
    return {"a_len": len(out["a"]), "by": "redflow-gevent"}
