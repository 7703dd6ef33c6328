"""A `-c 500` worker subprocess drains 5,000 runs, each succeeding exactly once."""

import time

import pytest
from helpers import WorkerProcess, wait_until


@pytest.mark.heavy
def test_a_500_slot_worker_drains_5000_runs_exactly_once(redis_url, prefix, cli_client, r):
    total = 5000
    seen_key = f"{prefix}:seen"
    k = cli_client.keys
    handles = cli_client.run_many("count", ({"key": seen_key, "n": i} for i in range(total)))
    began = time.monotonic()
    with WorkerProcess(redis_url, prefix, concurrency=500, lease_ms=5000) as worker:
        wait_until(lambda: r.zcard(k.runs_status("succeeded")) == total, timeout=120, interval=0.2)
        elapsed = time.monotonic() - began
        assert worker.stop() == 0
    executions = r.hgetall(seen_key)
    assert len(executions) == total and set(executions.values()) == {"1"}
    assert {h.id for h in handles} == set(executions)
    assert {r.hget(k.run(h.id), "status") for h in handles} == {"succeeded"}
    assert r.llen(k.queue_ready("default")) == 0 and r.llen(k.queue_processing("default")) == 0
    print(f"\n5000 two-step runs drained by one -c 500 worker in {elapsed:.2f}s ({total / elapsed:.0f} runs/s, incl. start-up)")
