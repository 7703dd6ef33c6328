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

The trickle learns of starts from a :class:`StartSource`: a worker observer
in this process (:class:`StartCounter`, exact counts, but the worker shares
the producer's GIL and drains at a fraction of its speed), or the run hashes
of a ``redflow-gevent worker`` subprocess (:class:`HashStarts`: whole
milliseconds, counts estimated from the backlog runs' ``startedAt``).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import gevent
from gevent.event import Event

from redflow.bench.probe import percentiles
from redflow.bench.worker import SubprocessWorker
from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.models import RunField
from redflow.registry import Registry, Workflow, define_workflow

BACKLOG_QUEUE = "fair-backlog"
QUIET_QUEUES = 49
#: The trickle stops once the backlog is down to this share, so every quiet run waited beside a backlog.
BACKLOG_LEFT = 0.1
QUIET_START_TIMEOUT_S = 30.0
#: How often :class:`HashStarts` reads a quiet run's hash until it started (it only paces the
#: trickle: the start time is the hash's own ``startedAt``).
START_POLL_S = 0.002
#: How long the backlog may take to drain after the trickle before its runs' hashes are read.
DRAIN_TIMEOUT_S = 300.0
#: The ``-A`` of a worker subprocess that runs :func:`fairness_registry`'s workflows.
APP = "redflow.bench.fairness:registry"


def quiet_queue(index: int) -> str:
    return f"fair-q{index}"


def _noop(ctx: object) -> None:
    """What a run costs is the engine's own work."""


def _started_at(ctx: object) -> float:
    """A quiet run: when its function ran, on the machine's wall clock (the worker's stored
    times are Redis's clock as the worker estimates it, which may lag by a round trip)."""
    return time.time()


def fairness_registry(quiet_queues: int = QUIET_QUEUES) -> Registry:
    """A backlog workflow on its queue and one workflow on each quiet queue."""
    registry = Registry()
    define_workflow("fair-backlog", queue=BACKLOG_QUEUE, registry=registry)(_noop)
    for index in range(quiet_queues):
        define_workflow(f"fair-quiet-{index}", queue=quiet_queue(index), registry=registry)(_started_at)
    return registry


#: What a worker subprocess runs (``-A`` APP).
registry = fairness_registry()


@dataclass(frozen=True, slots=True)
class Sent:
    """A quiet run the trickle enqueued: ``time.time()`` just before, and the backlog's starts then."""

    run_id: str
    sent_s: float
    backlog_before: int


@dataclass(frozen=True, slots=True)
class QuietStart:
    backlog_starts: int  # backlog runs started between the quiet run's enqueue and its start
    waited_s: float


class StartSource(Protocol):
    """Where the trickle learns of starts."""

    def backlog_started(self) -> int:
        """Backlog runs started so far."""
        ...

    def wait_started(self, run_id: str, timeout_s: float) -> bool: ...

    def quiet_starts(self, sent: list[Sent]) -> list[QuietStart]:
        """Each quiet run's figures, once the trickle is over."""
        ...


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

    def backlog_started(self) -> int:
        return self.backlog_starts

    def wait_started(self, run_id: str, timeout_s: float) -> bool:
        # (it may have started while the enqueue's reply was on its way: no watch needed then)
        return run_id in self.started or self.watch(run_id).wait(timeout_s)

    def quiet_starts(self, sent: list[Sent]) -> list[QuietStart]:
        return [QuietStart(self.started[s.run_id][0] - s.backlog_before, self.started[s.run_id][1] - s.sent_s) for s in sent]


class HashStarts:
    """Starts as a ``redflow-gevent worker`` subprocess records them in Redis.

    The backlog's starts so far are its runs no longer in its ready list (a
    busy slot's take claims and starts a run in one script). A quiet run's
    start is what its function returns: ``time.time()`` as it ran, the
    clock the producer dates the enqueue with. The times the worker stores
    will not do for it: they are Redis's clock as the worker carries it
    forward from a ``TIME`` read (behind by that read's round trip, hundreds
    of ms on a loaded machine), and ``startedAt`` is taken as the take that
    starts the run is built, which a busy slot sends beside a settle, before
    the quiet run may even be enqueued. The backlog runs started between a
    quiet run's enqueue and its start are counted from their ``finishedAt``
    (the worker's clock as their settle left, right after the no-op ran),
    the enqueue moved onto that clock by the quiet run's own offset (its
    ``finishedAt`` less its wall-clock start): whole milliseconds, so a run
    counts as started in the middle of its millisecond, and a backlog run
    of the quiet run's own millisecond counts half (at 25,000 runs/s a
    millisecond is 25 starts).
    """

    def __init__(self, worker: SubprocessWorker, ready_key: str, backlog_ids: list[str]) -> None:
        self.worker, self.ready_key, self.backlog_ids = worker, ready_key, backlog_ids

    def backlog_started(self) -> int:
        return len(self.backlog_ids) - int(self.worker.probe.call("LLEN", self.ready_key))

    def wait_started(self, run_id: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.worker.probe.call("HGET", self.worker.keys.run(run_id), RunField.STARTED_AT):
            if time.monotonic() >= deadline:
                return False
            gevent.sleep(START_POLL_S)
        return True

    def quiet_starts(self, sent: list[Sent]) -> list[QuietStart]:
        self.worker.wait_done(len(self.backlog_ids) + len(sent), DRAIN_TIMEOUT_S)  # every run's hash complete
        probe, keys = self.worker.probe, self.worker.keys
        outputs = probe.pipeline(("HGET", keys.run(s.run_id), RunField.OUTPUT_JSON) for s in sent)
        settled = self.worker.timings(s.run_id for s in sent)
        backlog = sorted(timing.finished_at for timing in self.worker.timings(self.backlog_ids).values())
        starts = []
        for s, output in zip(sent, outputs):
            started_s, settled_s = float(codec.loads(output)), settled[s.run_id].finished_at
            sent_on_worker_clock = s.sent_s + (settled_s - started_s)
            before_start = (bisect.bisect_left(backlog, settled_s) + bisect.bisect_right(backlog, settled_s)) / 2
            starts.append(QuietStart(round(before_start - bisect.bisect_right(backlog, sent_on_worker_clock)), started_s - s.sent_s))
        return starts


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
    client: RedflowClient, source: StartSource, workflows: list[Workflow], *, backlog: int, most: int, pause_s: Callable[[], float]
) -> Fairness:
    """Quiet runs one at a time, round robin over ``workflows``, until ``most``
    have started or the backlog is down to BACKLOG_LEFT of ``backlog``."""
    sent: list[Sent] = []
    began, first_count = time.monotonic(), source.backlog_started()
    before = first_count
    while len(sent) < most and backlog - before > BACKLOG_LEFT * backlog:
        workflow = workflows[len(sent) % len(workflows)]
        sent_s = time.time()
        handle = client.run(workflow, None)
        if not source.wait_started(handle.id, QUIET_START_TIMEOUT_S):
            raise TimeoutError(f"a quiet run ({handle.id}) did not start within {QUIET_START_TIMEOUT_S:.0f} s")
        sent.append(Sent(handle.id, sent_s, before))
        gevent.sleep(pause_s())
        before = source.backlog_started()
    backlog_started, trickle_s = before - first_count, time.monotonic() - began
    return Fairness(source.quiet_starts(sent), backlog_started, trickle_s)


def enqueue_backlog(client: RedflowClient, count: int) -> list[str]:
    """``count`` backlog runs; their ids."""
    ids: list[str] = []
    for start in range(0, count, 5000):
        ids.extend(handle.id for handle in client.run_many("fair-backlog", [None] * min(5000, count - start)))
    return ids


def report_line(result: Fairness, **context: Any) -> str:
    waited = result.waited_ms()
    where = ", ".join(f"{key} {value}" for key, value in context.items())
    return (
        f"{where}: {len(result.starts)} quiet runs while the backlog drained at {result.backlog_per_s:,.0f} runs/s; "
        f"backlog runs started before a quiet run: p50 {result.backlog_starts_p(0.5):.0f}, p99 {result.backlog_starts_p(0.99):.0f}, "
        f"max {max(s.backlog_starts for s in result.starts)}; enqueue->start p50 {waited['p50']:.1f} ms, "
        f"p99 {waited['p99']:.1f} ms, max {waited['max']:.1f} ms"
    )
