"""The worker a bench measures: in this process, or a ``redflow-gevent worker`` subprocess.

Both give the bench the same things: a pid to read CPU and memory from,
a way to wait until N runs have ended, and each run's timings. In-process,
timings are the worker's own hot-path timestamps (an observer); from a
subprocess they are read back from the run hashes, where they are whole
milliseconds and the claim is not recorded (``startedAt`` stands for it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import gevent

if TYPE_CHECKING:
    from redflow.engine.worker import Worker

from redflow.bench import app as bench_app
from redflow.bench.probe import AttemptRecorder, BenchError, Probe, Timing
from redflow.core.keys import Keys
from redflow.core.models import RunField
from redflow.ops.cli.supervisor import cli_command

#: How often a subprocess worker's progress is polled (ZCARD of the terminal status indexes).
POLL_S = 0.02
_TERMINAL = ("succeeded", "failed", "canceled")


class BenchWorker(Protocol):
    kind: str
    precise: bool  # sub-millisecond hot-path timestamps
    pid: int

    def start(self) -> None: ...
    def done_count(self) -> int: ...
    def wait_done(self, count: int, timeout: float, tick: Callable[[int], None] | None = None) -> None: ...
    def timings(self, run_ids: Iterable[str]) -> dict[str, Timing]: ...
    def stop(self) -> None: ...


class BenchTimeout(BenchError):
    """The worker did not finish the runs in time."""


class InProcessWorker:
    """``start_worker`` in this process, with an :class:`AttemptRecorder`."""

    kind = "in-process"
    precise = True

    def __init__(self, url: str, prefix: str, concurrency: int) -> None:
        self.url, self.prefix, self.concurrency = url, prefix, concurrency
        self.recorder = AttemptRecorder()
        self.pid = os.getpid()
        self._worker: Worker | None = None

    def start(self) -> None:
        from redflow.engine.worker import start_worker

        self._worker = start_worker(
            bench_app.registry, url=self.url, prefix=self.prefix, concurrency=self.concurrency, observers=[self.recorder]
        )

    def done_count(self) -> int:
        return len(self.recorder)

    def wait_done(self, count: int, timeout: float, tick: Callable[[int], None] | None = None) -> None:
        deadline = time.monotonic() + timeout
        while not self.recorder.wait_for(count, min(0.2, max(0.0, deadline - time.monotonic()))):
            if tick is not None:
                tick(len(self.recorder))
            if time.monotonic() >= deadline:
                raise BenchTimeout(f"{len(self.recorder)} of {count} runs ended within {timeout:.0f}s")

    def timings(self, run_ids: Iterable[str]) -> dict[str, Timing]:
        recorded = self.recorder.timings
        return {run_id: recorded[run_id] for run_id in run_ids if run_id in recorded}

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.stop(timeout=10)
            self._worker = None


class SubprocessWorker:
    """The real ``redflow-gevent worker`` command on :mod:`redflow.bench.app` (or ``app``, a ``-A`` value)."""

    kind = "subprocess"
    precise = False

    def __init__(self, url: str, prefix: str, concurrency: int, probe: Probe, app: str = "redflow.bench.app:registry") -> None:
        self.url, self.prefix, self.concurrency, self.app = url, prefix, concurrency, app
        self.probe = probe
        self.keys = Keys(prefix)
        self.pid = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="redflow-bench-worker-", suffix=".log", delete=False)

    def command(self) -> list[str]:
        return [
            *cli_command(), "--log-level", "warning", "worker", "-A", self.app,
            "-c", str(self.concurrency), "--prefix", self.prefix,
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The worker's environment: the URL goes in ``REDIS_URL``, where ``ps`` does not show a password."""
        return {**os.environ, "REDIS_URL": self.url}

    def start(self) -> None:
        self._proc = subprocess.Popen(self.command(), env=self.environment(), stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self._proc.pid

    def output(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def done_count(self) -> int:
        self._check_alive()
        return sum(self.probe.pipeline(("ZCARD", self.keys.runs_status(status)) for status in _TERMINAL))

    def wait_done(self, count: int, timeout: float, tick: Callable[[int], None] | None = None) -> None:
        deadline = time.monotonic() + timeout
        while (done := self.done_count()) < count:
            if tick is not None:
                tick(done)
            if time.monotonic() >= deadline:
                raise BenchTimeout(f"{done} of {count} runs ended within {timeout:.0f}s")
            gevent.sleep(POLL_S)

    def timings(self, run_ids: Iterable[str]) -> dict[str, Timing]:
        ids = list(run_ids)
        out: dict[str, Timing] = {}
        fields = (RunField.STARTED_AT, RunField.FINISHED_AT, RunField.STATUS)
        for start in range(0, len(ids), 1000):
            batch = ids[start : start + 1000]
            replies = self.probe.pipeline(("HMGET", self.keys.run(run_id), *fields) for run_id in batch)
            for run_id, (started, finished, status) in zip(batch, replies):
                if started and finished:  # the middle of the (whole) millisecond, so that no bias is left
                    started_s, finished_s = (int(started) + 0.5) / 1000.0, (int(finished) + 0.5) / 1000.0
                    out[run_id] = Timing(started_s, started_s, finished_s, status)
        return out

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise BenchError(f"the worker subprocess exited with {self._proc.returncode}:\n{self.output()[-2000:]}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
        os.unlink(self._log.name)
