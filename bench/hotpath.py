"""Benchmarks timed by the worker's own hot-path timestamps.

pytest-benchmark times a round as ``timer()`` called before and after the
target. :func:`hot_path_timer`, given as the benchmark's ``timer``, returns
the two timestamps the round's setup queued (the worker's ``claimed_at``
and ``finished_at`` of the run it released), so with a no-op target a
round lasts exactly from dequeue to finalize as the worker stamped them,
and none of the bench's own enqueue or wait is counted. Outside a round it
is ``time.perf_counter``.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from redflow.bench.phases import Bench, Staged, open_bench, per_run_redis, preload, wait_warm
from redflow.bench.probe import ServerSample, server_delta
from redflow.bench.worker import InProcessWorker

_pending: deque[float] = deque()


def hot_path_timer() -> float:
    return _pending.popleft() if _pending else time.perf_counter()


def _replay(start: float, end: float) -> None:
    _pending.clear()  # a round that never read its stamps must not shift the next one
    _pending.extend((start, end))


def nothing() -> None:
    """The timed target: the time is in the stamps, not in this call."""


@dataclass
class StagedRuns:
    """Runs parked in a staging list, released to a warm worker one per round."""

    bench: Bench
    staged: Staged
    released: int = 0
    before: ServerSample | None = None

    def release_one(self) -> None:
        """A round's setup: hand one run to the worker, wait for it, queue its stamps."""
        bench = self.bench
        if self.before is None:
            self.before = bench.probe.sample()
        run_id = bench.probe.call("LMOVE", self.staged.key, bench.ready_key, "RIGHT", "LEFT")
        self.released += 1
        worker = bench.worker
        assert isinstance(worker, InProcessWorker)
        if run_id is None or not worker.recorder.wait_for(self.released, 10.0):
            raise RuntimeError(f"run {self.released} was not run within 10 s")
        timing = worker.recorder.timings[run_id]
        if timing.outcome != "succeeded":
            raise RuntimeError(f"bench run {run_id} ended {timing.outcome}")
        _replay(timing.claimed_at, timing.finished_at)

    def redis_per_run(self) -> dict[str, Any]:
        """Round trips and commands per run over the rounds so far (for ``extra_info``)."""
        if self.before is None:
            return {}
        return per_run_redis(server_delta(self.before, self.bench.probe.sample()), self.released)


@contextlib.contextmanager
def staged(redis_url: str, runs: int, *, steps: int = 0, replay: bool = False, concurrency: int = 1) -> Iterator[StagedRuns]:
    """``runs`` runs staged for a started, warm in-process worker."""
    with open_bench(redis_url, concurrency, steps=steps, replay=replay) as bench:
        staged = preload(bench, runs)
        bench.worker.start()
        wait_warm(bench)
        yield StagedRuns(bench, staged)
