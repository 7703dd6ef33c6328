"""Promises 2 and 3: Redis restarts and dropped connections.

2. A redis-server with AOF (``appendfsync always``) is stopped or killed
   mid-load and started again on the same port: the workers reconnect by
   themselves with backoff, and every run submitted before and after ends
   terminal, none lost, none finalized twice. Without persistence a restart
   loses the runs (not promised), but the workers still carry on.
3. ``CLIENT KILL TYPE normal`` drops every connection of the workers (and
   of the test's client) again and again: the workers recover without a
   restart and every run ends once, each step executed once.
"""

import gevent
import pytest
from helpers import wait_until

from tests.chaos.harness import alive, restart
from tests.chaos.kit import (
    outputs_disagreeing_with_steps,
    prove_each_finalized_once,
    queue_leftovers,
    terminal_count,
    wait_terminal,
)

JOURNEY_STEPS = ("a", "b", "c")


def submit(client, count, **options):
    return [h.id for h in client.run_many("journey", [options] * count)]


@pytest.mark.heavy
@pytest.mark.engine(persistent=True)
@pytest.mark.parametrize("how", ["stop", "kill"], ids=["sigterm", "sigkill"])
def test_runs_submitted_before_and_after_a_restart_of_a_persistent_redis_all_end_once(
    how, engine, er, chaos_client, workers, side, witness, terminal_watch, report
):
    keys = chaos_client.keys
    pool = [workers.spawn(engine.url, concurrency=50) for _ in range(2)]
    pids = [w.proc.pid for w in pool]
    before = submit(chaos_client, 600, nap_s=0.2)
    terminal_watch.add(before)
    wait_until(lambda: terminal_count(er, keys) >= 100, timeout=60, message="the load to be under way")
    in_flight = er.zcard(keys.runs_status("running"))

    restart(engine, er, down_s=2.0, crash=how == "kill")  # SIGKILL: a crash; appendfsync always kept every write
    after = submit(chaos_client, 600, nap_s=0.2)
    terminal_watch.add(after)
    everything = before + after
    waited = wait_terminal(er, keys, everything, timeout=180)
    rerun = sum(1 for n in side.handlers().values() if n > 1)
    report(f"{how}: {in_flight} runs in flight at the restart; all 1200 terminal {waited:.1f}s after it came back; "
           f"{rerun} handlers ran again (at-least-once)")  # fmt: skip

    audit = prove_each_finalized_once(er, keys, everything, witness=witness, watch=terminal_watch, witness_saw_everything=False)
    assert audit.statuses == {"succeeded": 1200}
    assert outputs_disagreeing_with_steps(er, keys, everything, JOURNEY_STEPS) == []
    assert set(queue_leftovers(er, keys, ["default"]).values()) == {0}
    assert [w.proc.pid for w in pool if alive(w)] == pids  # the same processes: they reconnected by themselves
    for worker in pool:
        assert "Redis error" in worker.output() and "retrying in" in worker.output()  # they backed off meanwhile


def test_a_restart_of_a_redis_without_persistence_loses_its_runs_but_the_workers_carry_on(engine, er, chaos_client, workers, side, witness):
    keys = chaos_client.keys
    worker = workers.spawn(engine.url, concurrency=5)
    lost = submit(chaos_client, 10, hold="step", hold_s=60)
    wait_until(lambda: len(side.steps("b")) == 5, timeout=30, message="5 runs inside step b")

    restart(engine, er, down_s=1.0)

    assert [chaos_client.get_run(run_id) for run_id in lost] == [None] * 10  # gone with the data: not promised
    fresh = submit(chaos_client, 50, nap_s=0.01)
    assert wait_terminal(er, keys, fresh, timeout=60) < 60
    prove_each_finalized_once(er, keys, fresh, witness=witness, witness_saw_everything=False)
    assert alive(worker)
    gevent.sleep(1.0)  # the stopped attempts of the lost runs write nothing back
    assert sum(er.exists(keys.run(run_id), keys.run_steps(run_id)) for run_id in lost) == 0


@pytest.mark.slow
def test_dropped_connections_are_reopened_without_restarting_the_worker_and_every_run_ends_once(
    engine, er, chaos_client, workers, side, witness, terminal_watch, report
):
    keys = chaos_client.keys
    # 5 s leases: a keeper whose connection is dropped reconnects and renews in time even on a loaded
    # machine (with 1 s leases a starved one lost a lease and a run ran twice).
    worker = workers.spawn(engine.url, concurrency=20, lease_ms=5000)
    first = submit(chaos_client, 300, nap_s=0.05)
    terminal_watch.add(first)
    killed = []
    for _ in range(10):  # bounded: ten rounds, 0.3 s apart
        gevent.sleep(0.3)
        # a loaded machine may take longer than that to reconnect: each round kills reopened connections
        wait_until(lambda: len(er.client_list(_type="normal")) > 1, timeout=30, message="connections reopened")
        killed.append(er.client_kill_filter(_type="normal"))
    second = submit(chaos_client, 100, nap_s=0.01)
    terminal_watch.add(second)
    waited = wait_terminal(er, keys, first + second, timeout=120)
    report(f"{sum(killed)} connections killed in 10 rounds; all 400 runs terminal {waited:.1f}s after the last")

    assert all(killed) and alive(worker)
    prove_each_finalized_once(er, keys, first + second, witness=witness, watch=terminal_watch)
    for run_id in first + second:
        assert side.executions(run_id, JOURNEY_STEPS) == {"handler": 1, "a": 1, "b": 1, "c": 1}, run_id
    assert set(queue_leftovers(er, keys, ["default"]).values()) == {0}
