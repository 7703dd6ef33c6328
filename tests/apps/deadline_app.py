"""A workflow with a timeout that worker subprocesses run, for the tests of a
worker killed around a run's deadline (tests/test_deadlines.py)."""

import gevent

from redflow import Registry, define_workflow

registry = Registry()


@define_workflow("bounded-call", registry=registry, timeout=2.5)
def bounded_call(ctx):
    """A call that outlasts the run's timeout."""
    ctx.step.run("call", lambda: gevent.sleep(60))
