"""Fair queues: a run enqueued to a quiet queue starts soon while another queue drains a backlog.

One queue holds a backlog of no-op runs; 49 quiet queues get a trickle,
one run at a time, round robin, while the backlog drains. For each quiet
run two figures:

- **backlog runs started** between its enqueue and its start, counted by a
  worker observer in the same process: the figure a test can hold to a
  bound, since it does not depend on the machine's speed (a worker that
  served queues first come first served would start the whole backlog
  first; a fair one a few runs per busy slot at most);
- **enqueue->start in ms**, which the bench prints beside the backlog's
  drain rate (the issue's target: p99 <= 50 ms while the backlog drains at
  full speed).

``tests/test_fairness.py`` holds the first to a bound; ``bench/fairness.py``
prints both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.event import Event

from redflow.bench.probe import percentiles
from redflow.client import RedflowClient
from redflow.registry import Registry, Workflow, define_workflow

BACKLOG_QUEUE = "fair-backlog"
QUIET_QUEUES = 49
#: The trickle stops once the backlog is down to this share, so every quiet run waited beside a backlog.
BACKLOG_LEFT = 0.1
QUIET_START_TIMEOUT_S = 30.0


def quiet_queue(index: int) -> str:
    return f"fair-q{index}"


def _noop(ctx: object) -> None:
    """What a run costs is the engine's own work."""


def fairness_registry(quiet_queues: int = QUIET_QUEUES) -> Registry:
    """A backlog workflow on its queue and one workflow on each quiet queue."""
    registry = Registry()
    define_workflow("fair-backlog", queue=BACKLOG_QUEUE, registry=registry)(_noop)
    for index in range(quiet_queues):
        define_workflow(f"fair-quiet-{index}", queue=quiet_queue(index), registry=registry)(_noop)
    return registry


@dataclass
class StartCounter:
    """A worker observer: counts the backlog's starts, and notes the count when a watched run starts."""

    backlog_starts: int = 0
    started: dict[str, tuple[int, float]] = field(default_factory=dict)  # run id -> (backlog starts, time)
    _watched: dict[str, Event] = field(default_factory=dict)

    def on_start(self, run_id: str, workflow: str, queue: str, attempt: int) -> None:
        if queue == BACKLOG_QUEUE:
            self.backlog_starts += 1
            return
        self.started[run_id] = (self.backlog_starts, time.time())
        event = self._watched.pop(run_id, None)
        if event is not None:
            event.set()

    def watch(self, run_id: str) -> Event:
        event = self._watched[run_id] = Event()
        return event


@dataclass(frozen=True, slots=True)
class QuietStart:
    backlog_starts: int  # backlog runs started between the quiet run's enqueue and its start
    waited_s: float


@dataclass(frozen=True, slots=True)
class Fairness:
    starts: list[QuietStart]
    backlog_started: int  # over the trickle
    trickle_s: float

    @property
    def backlog_per_s(self) -> float:
        return self.backlog_started / self.trickle_s

    def backlog_starts_p(self, fraction: float) -> float:
        ordered = sorted(start.backlog_starts for start in self.starts)
        return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])

    def waited_ms(self) -> dict[str, float]:
        return percentiles([start.waited_s for start in self.starts])


def trickle(
    client: RedflowClient, counter: StartCounter, workflows: list[Workflow], *, backlog: int, most: int, pause_s: Callable[[], float]
) -> Fairness:
    """Quiet runs one at a time, round robin over ``workflows``, until ``most``
    have started or the backlog is down to BACKLOG_LEFT of ``backlog``."""
    starts: list[QuietStart] = []
    began, first_count = time.monotonic(), counter.backlog_starts
    while len(starts) < most and backlog - counter.backlog_starts > BACKLOG_LEFT * backlog:
        workflow = workflows[len(starts) % len(workflows)]
        before, sent = counter.backlog_starts, time.time()
        handle = client.run(workflow, None)
        # (it may have started while the enqueue's reply was on its way: no watch needed then)
        if handle.id not in counter.started and not counter.watch(handle.id).wait(QUIET_START_TIMEOUT_S):
            raise TimeoutError(f"a quiet run ({handle.id}) did not start within {QUIET_START_TIMEOUT_S:.0f} s")
        at_count, at = counter.started[handle.id]
        starts.append(QuietStart(at_count - before, at - sent))
        gevent.sleep(pause_s())
    return Fairness(starts, counter.backlog_starts - first_count, time.monotonic() - began)


def enqueue_backlog(client: RedflowClient, count: int) -> None:
    for start in range(0, count, 5000):
        client.run_many("fair-backlog", [None] * min(5000, count - start))


def report_line(result: Fairness, **context: Any) -> str:
    waited = result.waited_ms()
    where = ", ".join(f"{key} {value}" for key, value in context.items())
    return (
        f"{where}: {len(result.starts)} quiet runs while the backlog drained at {result.backlog_per_s:,.0f} runs/s; "
        f"backlog runs started before a quiet run: p50 {result.backlog_starts_p(0.5):.0f}, p99 {result.backlog_starts_p(0.99):.0f}, "
        f"max {max(s.backlog_starts for s in result.starts)}; enqueue->start p50 {waited['p50']:.1f} ms, "
        f"p99 {waited['p99']:.1f} ms, max {waited['max']:.1f} ms"
    )
