"""What the cross-feature model (tests/chaos/test_cross_features.py) drives and watches.

* :class:`Fleet`: the workers: ``redflow-gevent worker`` subprocesses (killed
  with SIGKILL, frozen with SIGSTOP past their lease) and one in-process
  worker whose estimate of Redis's clock can be made to lag (what a worker
  frozen between preparing a call and sending it sends).
* :class:`Sampler`: a greenlet that reads, every few ms and atomically with
  Redis's ``TIME``, the rate window, the runs of the capped workflow that are
  running and which parents' cancels have settled (the parent canceled, each
  child ended or told to stop). It never trusts a worker's clock:
  a start first seen in sample k was admitted between sample k-1 and sample k
  of Redis's clock (in whole ms: [sample k-1, sample k]).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.lock import Semaphore
from helpers import WorkerProcess
from invariants import rate_breaches

from redflow.store.server_clock import ServerClock
from tests.chaos.apps.model_app import CAPPED_LIMIT, RATE_LIMIT, RATE_PERIOD_S

RATE_PERIOD_MS = int(RATE_PERIOD_S * 1000)
SAMPLE_S = 0.02


class LaggingClock(ServerClock):
    """Redis's clock as a worker sees it, ``lag_ms`` behind (0: as the worker's own)."""

    def __init__(self, redis: Any) -> None:
        super().__init__(redis)
        self.lag_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() - self.lag_ms


@dataclass
class Fleet:
    """The model's workers. ``spawn()`` starts one more subprocess worker."""

    spawn: Callable[[], WorkerProcess]
    clock: LaggingClock
    processes: list[WorkerProcess] = field(default_factory=list)
    frozen: set[int] = field(default_factory=set)

    def alive(self) -> list[WorkerProcess]:
        return [w for w in self.processes if w.proc.poll() is None]

    def thawed(self) -> list[WorkerProcess]:
        return [w for w in self.alive() if w.proc.pid not in self.frozen]

    def kill(self, worker: WorkerProcess) -> None:
        """SIGKILL, and a new worker in its place (its runs are recovered by the others' reapers)."""
        self.frozen.discard(worker.proc.pid)
        worker.kill()
        self.processes.append(self.spawn())

    def freeze(self, workers: list[WorkerProcess], seconds: float) -> None:
        """SIGSTOP now, SIGCONT after ``seconds`` (past the lease: another worker takes its runs over)."""
        for worker in workers:
            self.frozen.add(worker.proc.pid)
            worker.signal(signal.SIGSTOP)
        gevent.spawn_later(seconds, self.thaw, workers)

    def thaw(self, workers: list[WorkerProcess] | None = None) -> None:
        for worker in self.alive() if workers is None else workers:
            if worker.proc.pid in self.frozen and worker.proc.poll() is None:
                worker.signal(signal.SIGCONT)
            self.frozen.discard(worker.proc.pid)


_SAMPLE_LUA = """
-- KEYS: rate window, running index; ARGV: run key prefix, the capped workflow, parent ids
local time = redis.call("time")
local running = 0
for _, id in ipairs(redis.call("zrange", KEYS[2], 0, -1)) do
  if redis.call("hget", ARGV[1] .. id, "workflow") == ARGV[2] then
    running = running + 1
  end
end
-- a parent's cancel has settled once it is canceled and each child in its index has
-- ended or been told to stop (the cascade ran), or is gone
local ended = {succeeded = true, failed = true, canceled = true}
local canceled = {}
for i = 3, #ARGV do
  local run_key = ARGV[1] .. ARGV[i]
  if redis.call("hget", run_key, "status") == "canceled" then
    local settled = true
    for _, child in ipairs(redis.call("zrange", run_key .. ":children", 0, -1)) do
      local state = redis.call("hmget", ARGV[1] .. child, "status", "cancelRequestedAt")
      if state[1] and not ended[state[1]] and (state[2] or "") == "" then
        settled = false
      end
    end
    if settled then
      table.insert(canceled, ARGV[i])
    end
  end
end
return {time[1], time[2], redis.call("zrange", KEYS[1], 0, -1, "WITHSCORES"), running, canceled}
"""


class Sampler:
    """Redis's view of the limits and of canceled parents, sampled while the model runs."""

    def __init__(self, r: Any, keys: Any, parents: list[str], report: Callable[[str], None]) -> None:
        self.r, self.keys, self.parents, self.report = r, keys, parents, report
        self.period_ms = RATE_PERIOD_MS
        self.starts: dict[str, tuple[int, int]] = {}  # "<run>:<attempt>@<ms>" -> Redis's bounds [lo, hi] of its admission
        self.window: dict[str, float] = {}
        self.canceled_at: dict[str, int] = {}  # parent -> Redis ms by which its cancel had settled, cascade included
        self.last_ms = 0
        self.longest_gap_ms = 0
        self.samples = 0
        self._glet: gevent.Greenlet | None = None
        self._one_at_a_time = Semaphore()  # the loop and a caller's sample() must not interleave their bounds

    def start(self) -> None:
        self._glet = gevent.spawn(self._loop)

    def stop(self) -> None:
        if self._glet is not None:
            self._glet.kill()
        self.sample()

    def _loop(self) -> None:
        while True:
            self.sample()
            gevent.sleep(SAMPLE_S)

    def sample(self) -> None:
        with self._one_at_a_time:
            self._sample()

    def _sample(self) -> None:
        keys = self.keys
        script_keys = [keys.rate_window("rated", None), keys.runs_status("running")]
        seconds, micros, flat, running, canceled = self.r.eval(_SAMPLE_LUA, 2, *script_keys, keys.run_prefix(), "capped", *self.parents)
        now = int(seconds) * 1000 + int(micros) // 1000
        self.samples += 1
        if self.last_ms:
            self.longest_gap_ms = max(self.longest_gap_ms, now - self.last_ms)
        window = {member: float(score) for member, score in zip(flat[::2], flat[1::2])}
        for member, score in window.items():
            if self.window.get(member) != score:  # new, or a resumed run's start moved it
                self._admitted(member, score, now)
        self.window = window
        if running > CAPPED_LIMIT:
            self.report(f"concurrency: {running} runs of 'capped' running at once at Redis ms {now} (limit {CAPPED_LIMIT})")
        for parent in canceled:
            self.canceled_at.setdefault(parent, now)
        self.last_ms = now

    def _admitted(self, member: str, score: float, now: int) -> None:
        lo = self.last_ms  # absent (or elsewhere) at the last sample
        self.starts[f"{member}@{int(score)}"] = (lo, now)
        if lo and not lo <= score <= now:  # whole ms: a start in the ms of the last sample has its score
            self.report(f"rate limit (issue 28 #5): start {member} recorded at {int(score)}, but Redis admitted it "
                        f"within [{lo}, {now}] by its own clock (the samples before and after)")  # fmt: skip

    def breaches(self) -> list[str]:
        """Proven breaches of the rate limit (a start seen at the first sample has no lower bound: left out)."""
        return rate_breaches({start: bounds for start, bounds in self.starts.items() if bounds[0]}, RATE_LIMIT, self.period_ms)

    def unseen(self, expected: set[str]) -> set[str]:
        """Starts (``<run>:<attempt>``) never seen in the window: with no sampling gap of a
        period (an entry stays a period by Redis's clock), each one would have been seen."""
        seen = {key.split("@")[0] for key in self.starts}
        return expected - seen
