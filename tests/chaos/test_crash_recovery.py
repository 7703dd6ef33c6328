"""Promise 1: a worker killed with SIGKILL mid-run loses nothing.

The reaper of another worker re-queues the run once its lease expires; the
run finishes exactly once; steps that had succeeded are replayed from
Redis, not executed again (counted in the side channel, not by the engine).
"""

import time

import pytest
from helpers import wait_until

from tests.chaos.kit import audit_runs, decode_steps, queue_leftovers

STEPS = ("a", "b", "c")


def step_succeeded(er, keys, run_id, step):
    raw = er.hget(keys.run_steps(run_id), step)
    return raw is not None and '"status":"succeeded"' in raw


@pytest.mark.parametrize("hold", ["step", "between"], ids=["killed-inside-a-step", "killed-between-steps"])
def test_a_killed_workers_run_is_recovered_by_another_worker_and_finished_once_without_rerunning_succeeded_steps(
    hold, engine, er, chaos_client, workers, side, witness, report
):
    keys = chaos_client.keys
    doomed = workers.spawn(engine.url)
    handle = chaos_client.run("journey", {"hold": hold, "hold_s": 60})
    wait_until(lambda: step_succeeded(er, keys, handle.id, "a"), timeout=20, message="step a to succeed")
    if hold == "step":
        wait_until(lambda: side.step("b", handle.id) == 1, timeout=10, message="step b to start")
    else:
        time.sleep(0.2)  # the handler is now sleeping between a and b
        assert side.step("b", handle.id) == 0
    record_a = er.hget(keys.run_steps(handle.id), "a")
    rescuer = workers.spawn(engine.url)

    doomed.kill()  # SIGKILL: no clean-up of any kind
    killed_at = time.monotonic()
    output = handle.result(timeout=60)
    report(f"{hold}: finished {time.monotonic() - killed_at:.2f}s after SIGKILL (a 1 s lease, then a reaper scan)")

    assert output["pid"] == rescuer.proc.pid
    reran_b = 2 if hold == "step" else 1  # b never succeeded before the kill, so it runs again
    assert side.executions(handle.id, STEPS) == {"handler": 2, "a": 1, "b": reran_b, "c": 1}
    assert output["a"].startswith("a:1:") and output["b"].startswith(f"b:{reran_b}:") and output["c"].startswith("c:1:")
    assert er.hget(keys.run_steps(handle.id), "a") == record_a  # replayed, its record untouched
    assert {name: step["status"] for name, step in decode_steps(er, keys, handle.id).items()} == dict.fromkeys(STEPS, "succeeded")
    run = chaos_client.get_run(handle.id)
    assert run.status == "succeeded" and run.attempt == 1  # a recovery is not a new attempt
    witness.drain()
    assert witness.pushes[handle.id] == 1
    audit_runs(er, keys, [handle.id]).assert_each_finalized_exactly_once(statuses={"succeeded"})
    assert set(queue_leftovers(er, keys, ["default"]).values()) == {0}
    assert "reaper: 1 run(s) of dead workers returned to ready" in rescuer.output()


def test_every_run_in_flight_on_a_killed_worker_is_recovered_once_and_its_queue_drained(
    engine, er, chaos_client, workers, side, witness, report
):
    keys = chaos_client.keys
    doomed = workers.spawn(engine.url, concurrency=20)
    holding = [chaos_client.run("journey", {"hold": "step", "hold_s": 60}) for _ in range(20)]  # claimed first (FIFO)
    waiting = [chaos_client.run("journey", {"nap_s": 0.01}) for _ in range(20)]
    handles = holding + waiting
    wait_until(lambda: len(side.steps("b")) == 20, timeout=30, message="20 runs inside step b")
    in_flight = set(side.steps("b"))
    assert in_flight == {h.id for h in holding}
    rescuer = workers.spawn(engine.url, concurrency=20)
    doomed.kill()
    killed_at = time.monotonic()
    outputs = {h.id: h.result(timeout=90) for h in handles}
    report(f"40 runs (20 in flight at SIGKILL) finished {time.monotonic() - killed_at:.2f}s after it")

    for run_id, output in outputs.items():
        was_in_flight = run_id in in_flight
        expected = {"handler": 2 if was_in_flight else 1, "a": 1, "b": 2 if was_in_flight else 1, "c": 1}
        assert side.executions(run_id, STEPS) == expected, run_id
        assert output["pid"] == rescuer.proc.pid
    witness.drain()
    assert witness.finalized_more_than_once(outputs) == {} and witness.never_finalized(outputs) == []
    audit_runs(er, keys, list(outputs)).assert_each_finalized_exactly_once(statuses={"succeeded"})
    assert set(queue_leftovers(er, keys, ["default"]).values()) == {0}
