"""The three measurements of ``redflow-gevent bench``.

- **drain**: N runs wait in a staging list while the worker warms up (its
  claimer blocked on the queue); one RENAME hands them all over at once, and the
  worker drains them: throughput, dequeue-to-finalize under full load, Redis
  commands and round trips per run, worker and Redis CPU per 1,000 runs,
  and the bytes Redis keeps per finished run once the drains are over.
  Every drain is staged before the worker starts, so that none waits on the
  producer and the producer never competes with the worker.
- **paced**: runs enqueued at a steady rate, each with a waiter blocked in
  ``handle.result()``: enqueue-to-start, dequeue-to-finalize and
  enqueue-to-result under light load. Enqueue times are taken by the
  producer just before it sends the run.
- **idle**: the worker with nothing to do: CPU, memory, Redis requests per second.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import gevent
from gevent.pool import Group

from redflow.bench import app as bench_app
from redflow.bench.probe import BenchError, Probe, ServerDelta, Timing, percentiles, process_sample, server_delta
from redflow.bench.profile import recording
from redflow.bench.worker import BenchTimeout, BenchWorker, InProcessWorker, SubprocessWorker
from redflow.client import RedflowClient
from redflow.core.models import RunField
from redflow.handle import RunHandle
from redflow.ops.control.prefix import delete_prefix
from redflow.store.connection import create_redis

#: How long the worker gets to have its claimer blocked on the queue before a drain.
WARM_TIMEOUT_S = 60.0
#: Before Redis's memory is read after a drain: its clients cron has then
#: counted every client's buffers, which the figure leaves out.
KEPT_SETTLE_S = 1.5


@dataclass
class Bench:
    """What every phase works with."""

    probe: Probe
    client: RedflowClient  # the producer's (and the waiters') client
    worker: BenchWorker
    concurrency: int
    steps: int = 0
    replay: bool = False
    timeout_s: float = 300.0
    progress: TextIO | None = None
    staged_batches: int = 0

    @property
    def workflow(self) -> str:
        return bench_app.workflow_for(self.steps)

    @property
    def ready_key(self) -> str:
        return self.client.keys.queue_ready(bench_app.QUEUE)


@dataclass(frozen=True, slots=True)
class Staged:
    """Runs parked in a list of their own until a drain hands them to the worker."""

    run_ids: list[str]
    key: str


@contextlib.contextmanager
def open_bench(
    url: str,
    concurrency: int,
    *,
    steps: int = 0,
    replay: bool = False,
    subprocess: bool = False,
    timeout_s: float = 300.0,
    progress: TextIO | None = None,
    cleanup: bool = False,
) -> Iterator[Bench]:
    """A bench on a fresh prefix: probe, producer client and a (not yet started)
    worker. ``cleanup`` deletes the prefix's keys at the end (a shared Redis)."""
    prefix = f"redflow-bench:{uuid.uuid4().hex[:12]}"
    probe = Probe(url)
    client = RedflowClient(create_redis(url), prefix=prefix, registry=bench_app.registry, owns_redis=True)
    worker: BenchWorker = SubprocessWorker(url, prefix, concurrency, probe) if subprocess else InProcessWorker(url, prefix, concurrency)
    try:
        yield Bench(probe, client, worker, concurrency, steps, replay, timeout_s, progress)
    finally:
        worker.stop()
        if cleanup:
            delete_prefix(client.redis, client.prefix)
        client.close()
        probe.close()


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, total: int, label: str, stream: TextIO | None) -> None:
        self.total, self.label = total, label
        self.stream = stream if stream is not None and stream.isatty() else None
        self.began = time.monotonic()

    def update(self, done: int) -> None:
        if self.stream is None:
            return
        elapsed = max(1e-9, time.monotonic() - self.began)
        filled = int(30 * done / max(1, self.total))
        bar = "#" * filled + "-" * (30 - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} {done / elapsed:,.0f} runs/s ")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.update(self.total)
            self.stream.write("\n")


# -- drain -------------------------------------------------------------------


def preload(bench: Bench, count: int) -> Staged:
    """Enqueue ``count`` runs (the worker must not run yet) and park them in a staging list."""
    inputs = [bench_app.run_input(bench.steps)] * count
    run_ids = [handle.id for handle in bench.client.run_many(bench.workflow, inputs)]
    if bench.replay:
        stored = bench_app.stored_steps(bench.steps, int(time.time() * 1000))
        pipe = bench.client.redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hset(bench.client.keys.run_steps(run_id), mapping=stored)
            pipe.hset(bench.client.keys.run(run_id), RunField.ATTEMPT, "1")  # as after the attempt that stored them
            if len(pipe) >= 500:
                pipe.execute()
        pipe.execute()
    staged = Staged(run_ids, f"{bench.ready_key}:bench-staging:{bench.staged_batches}")
    bench.staged_batches += 1
    bench.probe.call("RENAME", bench.ready_key, staged.key)
    return staged


def wait_warm(bench: Bench) -> None:
    """Until the worker's claimer of the bench's queue is blocked in BLMOVE on the (empty)
    ready list (its idle slots wait on the worker's board, without a connection)."""
    deadline = time.monotonic() + WARM_TIMEOUT_S
    while bench.probe.sample().blocked_clients < 1:
        bench.worker.done_count()  # raises if a worker subprocess died
        if time.monotonic() > deadline:
            raise BenchTimeout(f"the worker's claimer was not waiting after {WARM_TIMEOUT_S:.0f}s")
        gevent.sleep(0.05)


def drain(bench: Bench, staged: Staged, profile_path: str | None = None) -> dict[str, Any]:
    """Release the staged runs at once and measure the worker draining them
    (sampled by py-spy into ``profile_path`` if given)."""
    run_ids = staged.run_ids
    count = len(run_ids)
    profiling = recording(profile_path, bench.worker.pid) if profile_path else contextlib.nullcontext()
    wait_warm(bench)
    with profiling:
        base = bench.worker.done_count()
        before, proc_before = bench.probe.sample(), process_sample(bench.worker.pid)
        released = time.time()
        bench.probe.call("RENAME", staged.key, bench.ready_key)
        progress = Progress(count, "drain", bench.progress)
        bench.worker.wait_done(base + count, bench.timeout_s, tick=lambda done: progress.update(done - base))
        progress.close()
        after, proc_after = bench.probe.sample(), process_sample(bench.worker.pid)
    timings = _succeeded_timings(bench, run_ids).values()
    elapsed = max(1e-3, max(t.finished_at for t in timings) - released)
    delta = server_delta(before, after)
    return {
        "runs": count,
        "seconds": elapsed,
        "runs_per_s": count / elapsed,
        "dequeue_to_finalize_ms": percentiles([t.finished_at - t.claimed_at for t in timings]),
        **per_run_redis(delta, count),
        "worker_cpu_s_per_1000_runs": (proc_after.cpu_s - proc_before.cpu_s) * 1000.0 / count,
        **per_run_redis_cpu(delta, count),
        "bench_commands": dict(delta.own_commands),
    }


def per_run_redis_cpu(delta: ServerDelta, count: int) -> dict[str, float]:
    """Redis CPU per run, and the runs/s one Redis core could serve at that cost
    (the ceiling however many workers there are)."""
    us_per_run = delta.cpu_s * 1e6 / count
    return {
        "redis_cpu_s_per_1000_runs": delta.cpu_s * 1000.0 / count,
        "redis_cpu_us_per_run": us_per_run,
        "runs_per_s_per_redis_core": 1e6 / us_per_run if us_per_run > 0 else 0.0,
    }


def kept_bytes_per_run(bench: Bench, before: int, runs: int) -> float:
    """What Redis still holds per finished run after the drains (run hashes,
    indexes, wake-up lists): the growth of its data since ``before``."""
    return (bench.probe.kept_bytes(settle_s=KEPT_SETTLE_S) - before) / runs


def per_run_redis(delta: ServerDelta, count: int) -> dict[str, Any]:
    """Round trips and commands (split by command) per run."""
    return {
        "round_trips_per_run": delta.trips / count,
        "commands_per_run": sum(delta.commands.values()) / count,
        "commands_per_run_by_command": {name: calls / count for name, calls in delta.commands.most_common()},
    }


#: How long the attempts' reports may lag the results a caller already read: a run's result is
#: readable once its settle script ran, before the worker's observer hears of its attempt.
REPORT_LAG_S = 5.0


def _succeeded_timings(bench: Bench, run_ids: list[str]) -> dict[str, Timing]:
    deadline = time.monotonic() + REPORT_LAG_S
    timings = bench.worker.timings(run_ids)
    while len(timings) < len(run_ids) and time.monotonic() < deadline:
        gevent.sleep(0.01)
        timings = bench.worker.timings(run_ids)
    failed = [run_id for run_id in run_ids if run_id not in timings or timings[run_id].outcome != "succeeded"]
    if failed:
        raise BenchError(f"{len(failed)} of {len(run_ids)} bench runs did not succeed (first: {failed[0]})")
    return timings


# -- paced ---------------------------------------------------------------------


def paced_runs(bench: Bench, count: int, rate: float, progress: Progress | None = None) -> tuple[dict[str, float], dict[str, float], float]:
    """``count`` runs at ``rate`` runs/s, each awaited by its own waiter greenlet:
    (run id -> enqueue time, run id -> result time, the time the first was sent)."""
    enqueued: dict[str, float] = {}
    results: dict[str, float] = {}
    waiters = Group()
    began = time.time()
    for index in range(count):
        delay = began + index / rate - time.time()
        if delay > 0:
            gevent.sleep(delay)
        sent = time.time()
        handle = bench.client.run(bench.workflow, bench_app.run_input(bench.steps))
        enqueued[handle.id] = sent
        waiters.spawn(_await, handle, results, bench.timeout_s)
        if progress is not None:
            progress.update(len(results))
    waiters.join(raise_error=True)
    return enqueued, results, began


def paced(bench: Bench, count: int, rate: float) -> dict[str, Any]:
    """``count`` runs at ``rate`` runs/s, each awaited by its own waiter greenlet."""
    progress = Progress(count, "paced", bench.progress)
    enqueued, results, began = paced_runs(bench, count, rate, progress)
    progress.close()
    produced_s = max(1e-3, max(enqueued.values()) - began)
    timings = _succeeded_timings(bench, list(enqueued))
    return {
        "runs": count,
        "rate": rate,
        "achieved_rate": (count - 1) / produced_s if count > 1 else rate,
        "enqueue_to_start_ms": percentiles([timings[run_id].started_at - sent for run_id, sent in enqueued.items()]),
        "dequeue_to_finalize_ms": percentiles([t.finished_at - t.claimed_at for t in timings.values()]),
        "enqueue_to_result_ms": percentiles([results[run_id] - sent for run_id, sent in enqueued.items()]),
    }


def _await(handle: RunHandle, results: dict[str, float], timeout_s: float) -> None:
    handle.result(timeout=timeout_s)
    results[handle.id] = time.time()


# -- idle ----------------------------------------------------------------------


def idle(bench: Bench, seconds: float) -> dict[str, Any]:
    """CPU, memory and Redis traffic of the worker doing nothing for ``seconds``."""
    before, proc_before = bench.probe.sample(), process_sample(bench.worker.pid)
    began = time.monotonic()
    gevent.sleep(seconds)
    after, proc_after = bench.probe.sample(), process_sample(bench.worker.pid)
    elapsed = time.monotonic() - began
    delta = server_delta(before, after)
    return {
        "seconds": elapsed,
        "cpu_percent": (proc_after.cpu_s - proc_before.cpu_s) * 100.0 / elapsed,
        "rss_mb": proc_after.rss_mb,
        "round_trips_per_s": delta.trips / elapsed,
        "commands_per_s_by_command": {name: calls / elapsed for name, calls in delta.commands.most_common()},
    }
