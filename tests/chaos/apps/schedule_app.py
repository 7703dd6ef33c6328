"""A workflow for schedules as data under kills (tests/chaos/test_schedule_leader.py).

A worker running this app waits ``ADVANCE_DELAY_S`` between a tick's run and
the tick's advance (the window a leader's death must not turn into a lost or
a doubled tick), so that a test can kill the leader right inside it.
"""

from __future__ import annotations

from redflow import Registry, define_workflow

from .late_advance import delay_tick_advance

registry = Registry()

#: Seconds between a tick's run and the tick's advance, in a worker running this app.
ADVANCE_DELAY_S = 0.5


@define_workflow("stamp", registry=registry)
def stamp(ctx):
    return {"run": ctx.run.id}


delay_tick_advance(ADVANCE_DELAY_S)
