"""One slot, one run at a time: dequeue to finalize, timed by the worker's own stamps.

``extra_info`` of each benchmark holds the Redis round trips and commands
per run over its rounds (the bench's own release of each run taken out).
"""

import pytest
from hotpath import hot_path_timer, nothing, staged

ROUNDS = 300
WARMUP = 30


def _bench_runs(benchmark, redis_url, **workflow):
    with staged(redis_url, ROUNDS + WARMUP, **workflow) as runs:
        benchmark.pedantic(nothing, setup=runs.release_one, rounds=ROUNDS, warmup_rounds=WARMUP)
        benchmark.extra_info.update(runs.redis_per_run())
    assert runs.released == ROUNDS + WARMUP
    return benchmark.extra_info


@pytest.mark.benchmark(group="hot-path", timer=hot_path_timer)
def test_a_noop_run_from_dequeue_to_finalize(benchmark, redis_url):
    info = _bench_runs(benchmark, redis_url)
    assert info["commands_per_run_by_command"]["fcall"] >= 2  # start and finalize


@pytest.mark.benchmark(group="hot-path", timer=hot_path_timer)
def test_a_five_step_run_from_dequeue_to_finalize(benchmark, redis_url):
    info = _bench_runs(benchmark, redis_url, steps=5)
    # start and finalize: the five records ride on the settle (engine/step_records.py)
    assert 2 <= info["commands_per_run_by_command"]["fcall"] < 3


@pytest.mark.benchmark(group="hot-path", timer=hot_path_timer)
def test_a_five_step_run_replayed_from_the_step_cache(benchmark, redis_url):
    info = _bench_runs(benchmark, redis_url, steps=5, replay=True)
    assert info["commands_per_run_by_command"]["fcall"] < 3  # no step written again
