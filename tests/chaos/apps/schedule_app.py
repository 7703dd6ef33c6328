"""A workflow for schedules as data under kills (tests/chaos/test_schedule_leader.py).

A worker running this app waits ``ADVANCE_DELAY_S`` between a tick's run and
the tick's advance (the window a leader's death must not turn into a lost or
a doubled tick), so that a test can kill the leader right inside it.
"""

from __future__ import annotations

import gevent

from redflow import Registry, define_workflow
from redflow.engine.schedules import ScheduleTicker
from redflow.store.requests import TickDone

registry = Registry()

#: Seconds between a tick's run and the tick's advance, in a worker running this app.
ADVANCE_DELAY_S = 0.5


@define_workflow("stamp", registry=registry)
def stamp(ctx):
    return {"run": ctx.run.id}


_advance = ScheduleTicker._done


def _advance_late(ticker: ScheduleTicker, done: TickDone) -> None:
    if done.run_id and done.done_ms is not None:
        gevent.sleep(ADVANCE_DELAY_S)
    _advance(ticker, done)


ScheduleTicker._done = _advance_late  # type: ignore[method-assign]
