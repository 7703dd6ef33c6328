"""Promise 6: a graceful stop under load, and the second signal.

SIGTERM while 500 runs are in flight: those runs finish, nothing new is
claimed, and the process exits 0 within its grace period. A second SIGTERM
exits at once; the runs it left are recovered by the next worker, their
succeeded steps replayed.
"""

import signal
import time

import pytest
from helpers import wait_until

from tests.chaos.kit import prove_each_finalized_once, queue_leftovers

STEPS = ("a", "b", "c")
GRACE_S = 60


@pytest.mark.heavy
def test_sigterm_lets_500_runs_in_flight_finish_claims_nothing_new_and_exits_0_within_the_grace_period(
    engine, er, chaos_client, workers, side, witness, report
):
    keys = chaos_client.keys
    # 5 s leases: 500 runs starting at once starve a keeper on a loaded machine, and a lost lease
    # would run a run's step b again (never exactly 500 inside it) or finalize it elsewhere.
    worker = workers.spawn(engine.url, "--grace", str(GRACE_S), concurrency=500, lease_ms=5000)
    in_flight = [h.id for h in chaos_client.run_many("journey", [{"hold": "step", "hold_s": 3.0}] * 500)]
    waiting = [h.id for h in chaos_client.run_many("journey", [{}] * 200)]  # FIFO: behind the 500
    wait_until(lambda: len(side.steps("b")) == 500, timeout=60, interval=0.1, message="500 runs inside step b")

    worker.signal(signal.SIGTERM)
    signaled_at = time.monotonic()
    assert worker.wait(timeout=GRACE_S + 30) == 0
    stopped_s = time.monotonic() - signaled_at
    report(f"exited 0 {stopped_s:.1f}s after SIGTERM with 500 runs in flight (each had up to 3 s left; grace {GRACE_S} s)")

    assert stopped_s < GRACE_S
    prove_each_finalized_once(er, keys, in_flight, witness=witness)
    assert {h: side.handler(h) for h in waiting} == dict.fromkeys(waiting, 0)  # never claimed
    assert {chaos_client.get_run(h).status for h in waiting} == {"queued"}
    assert er.llen(keys.queue_ready("default")) == 200 and er.llen(keys.queue_processing("default")) == 0
    assert "stopping gracefully" in worker.output() and "worker stopped" in worker.output()


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_a_second_sigterm_exits_at_once_and_the_next_worker_recovers_the_runs_without_rerunning_succeeded_steps(
    engine, er, chaos_client, workers, side, witness, report
):
    keys = chaos_client.keys
    # 5 s leases, as the load test's: 200 runs starting at once are a burst of CPU, and on a loaded
    # machine a keeper starved past a 1 s lease lost runs (handed on by the reaper, so run again)
    # before the signals. The next worker then takes the runs over once their leases expire.
    worker = workers.spawn(engine.url, "--grace", str(GRACE_S), concurrency=200, lease_ms=5000)
    ids = [h.id for h in chaos_client.run_many("journey", [{"hold": "step", "hold_s": 60}] * 200)]
    wait_until(lambda: len(side.steps("b")) == 200, timeout=60, interval=0.1, message="200 runs inside step b")

    worker.signal(signal.SIGTERM)
    wait_until(lambda: "stopping gracefully" in worker.output(), timeout=10)
    worker.signal(signal.SIGTERM)
    signaled_at = time.monotonic()
    assert worker.wait(timeout=10) != 0
    exit_s = time.monotonic() - signaled_at
    assert {chaos_client.get_run(h).status for h in ids} == {"running"}  # left, not finalized

    workers.spawn(engine.url, concurrency=200, lease_ms=5000)  # its 200 recovered runs start at once too
    for run_id in ids:
        chaos_client.wait_for(run_id, timeout=60)
    report(f"second SIGTERM: exited {exit_s:.2f}s after it; the next worker finished all 200 runs "
           f"{time.monotonic() - signaled_at:.1f}s after it")  # fmt: skip

    prove_each_finalized_once(er, keys, ids, witness=witness)
    for run_id in ids:
        assert side.executions(run_id, STEPS) == {"handler": 2, "a": 1, "b": 2, "c": 1}, run_id
    assert set(queue_leftovers(er, keys, ["default"]).values()) == {0}
