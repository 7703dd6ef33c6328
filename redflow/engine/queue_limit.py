"""How many runs of one queue a worker of several queues keeps in flight (issue 34, fair queues).

A worker whose CPU is saturated runs its slots' greenlets one after another:
a reply waits in the hub, and on its shared connection, behind the replies
of every run ahead of it, so a quiet queue's run waits about (runs in
flight) x (CPU per run) to start: 50-60 ms at ``-c 500`` draining a
backlog (docs/performance.md, "Fair queues"). Runs in flight beyond those
that keep the CPU busy buy no throughput then, only that wait. So such a
worker measures its hub's lag (how late a timer fires: the CPU work queued
ahead of any reply) and limits the runs in flight of any one queue:

- while the lag stays above ``LAG_HIGH_MS``, the limit comes down by a tenth
  of the busiest queue's runs in flight, to ``MIN_LIMIT`` at least;
- while it stays below ``LAG_LOW_MS``, it goes up by a tenth, to the slot
  count at most.

A queue at its limit claims no next run at its settles and gets no idle
slot (engine/board.py); the slots it leaves idle serve the other queues at
once, through their claimers. Runs that wait on I/O leave the hub idle: the
lag stays low and the limit at the slot count, so a worker of I/O-bound runs
still keeps every slot busy on one queue. A worker of one queue has no
other queue to be fair to: it keeps no limit and samples nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: How often the hub's lag is sampled (a timer of this delay; its lateness is the lag)...
SAMPLE_S = 0.01
#: ...while a queue holds MIN_LIMIT runs in flight or the limit is down; else (the limit cannot
#: bind: an idle or lightly loaded worker) this seldom, so that it costs an idle worker nothing.
SLACK_SAMPLE_S = 0.25
#: The lag above which the busiest queue's runs in flight are cut (the hub runs a few ms of work per turn).
LAG_HIGH_MS = 4.0
#: The lag below which the limit grows again.
LAG_LOW_MS = 1.5
#: No queue is held below this many runs in flight: enough to keep a worker's CPU and its
#: shared connections busy (at 64, a backlog of no-op runs drains as fast as at 500: docs/performance.md).
MIN_LIMIT = 64
#: The share of the limit a sample moves it by.
STEP = 0.1


class QueueLimit:
    """The limit on one queue's runs in flight, moved by the hub's lag (see the module docstring)."""

    def __init__(self, slots: int, busiest: Callable[[], int]) -> None:
        self.slots = slots
        self.limit = slots
        self._busiest = busiest  # the runs in flight of the busiest queue
        self._due = 0.0  # when the sampling timer should fire (monotonic s)
        self.on_raise: Callable[[], object] = lambda: None  # the board gives idle slots work again

    def step(self) -> float:
        """One sample (a :class:`~redflow.engine.loops.Loop` step): the delay to the next."""
        now = time.monotonic()
        if self._due:
            self.heard(lag_ms=(now - self._due) * 1000.0)
        delay = SAMPLE_S if self.limit < self.slots or self._busiest() >= MIN_LIMIT else SLACK_SAMPLE_S
        self._due = now + delay
        return delay

    def heard(self, lag_ms: float) -> None:
        """The hub ran ``lag_ms`` late: move the limit."""
        if lag_ms > LAG_HIGH_MS:
            busiest = self._busiest()
            if busiest >= MIN_LIMIT:  # cut from what is in flight: a limit above it would cut nothing
                self.limit = max(MIN_LIMIT, min(self.limit, busiest) - max(1, int(busiest * STEP)))
        elif lag_ms < LAG_LOW_MS and self.limit < self.slots:
            self.limit = min(self.slots, self.limit + max(1, int(self.limit * STEP)))
            self.on_raise()
