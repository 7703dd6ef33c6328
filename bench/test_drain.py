"""A warm worker drains runs handed over all at once: the throughput figure."""

import contextlib

import pytest

from redflow.bench.phases import drain, open_bench, preload, wait_warm

RUNS = 2000


@pytest.mark.parametrize("concurrency", [1, 500])
def test_a_worker_drains_noop_runs(benchmark, redis_url, concurrency):
    """A round is one drain of RUNS no-op runs by a fresh, warm worker (the
    time is wall time around the drain); the worker's own figures of the
    fastest round go to extra_info."""
    figures = []
    rounds = contextlib.ExitStack()

    def setup():
        bench = rounds.enter_context(open_bench(redis_url, concurrency))
        staged = preload(bench, RUNS)
        bench.worker.start()
        wait_warm(bench)
        return (bench, staged), {}

    with rounds:
        benchmark.pedantic(
            lambda bench, staged: figures.append(drain(bench, staged)), setup=setup, teardown=lambda *_: rounds.close(), rounds=3
        )
    best = max(figures, key=lambda f: f["runs_per_s"])
    benchmark.extra_info.update({key: best[key] for key in ("runs_per_s", "round_trips_per_run", "worker_cpu_s_per_1000_runs")})
    assert [f["runs"] for f in figures] == [RUNS] * 3
