"""A schedule tick advanced late, for the apps whose cron leader a chaos test kills.

:func:`delay_tick_advance` makes a worker running the app wait between a
tick's run and the tick's advance (the window a leader's death must not turn
into a lost or a doubled tick), so that a test can kill the leader right inside it.
"""

from __future__ import annotations

import gevent

from redflow.engine.schedules import ScheduleTicker
from redflow.store.requests import TickDone


def delay_tick_advance(seconds: float) -> None:
    """Wait ``seconds`` after a tick's run, before the tick's advance, in this process."""
    advance = ScheduleTicker._done

    def advance_late(ticker: ScheduleTicker, done: TickDone) -> None:
        if done.run_id and done.done_ms is not None:
            gevent.sleep(seconds)
        advance(ticker, done)

    ScheduleTicker._done = advance_late  # type: ignore[method-assign]
