"""Promise 4: a worker that lost a run's lease leaves the run to its new owner.

Two ways to lose it while the run is still going: the lease key is deleted
(the old worker's keeper notices at its next renewal), or the old worker
freezes (SIGSTOP: a long GC pause, a stalled VM) past its lease, another
worker takes the run over and finishes it, and then the old one wakes up.
Either way the old worker must not finalize the run, the new owner does,
and the run ends once.
"""

import pytest
from helpers import wait_until

from tests.chaos.harness import alive, freeze_past_the_lease_and_resume
from tests.chaos.kit import FinalizeWitness, audit_runs

STEPS = ("a", "b", "c")


def test_a_deleted_lease_stops_the_old_attempt_and_the_new_owner_finishes_the_run_once(engine, er, chaos_client, workers, side, witness):
    keys = chaos_client.keys
    old = workers.spawn(engine.url)
    handle = chaos_client.run("journey", {"hold": "step", "hold_s": 60})
    wait_until(lambda: side.step("b", handle.id) == 1, timeout=20, message="step b to start")
    assert er.delete(keys.run_lease(handle.id)) == 1

    output = handle.result(timeout=30)

    # the first execution never got past b: c ran once, in the new owner's execution
    assert side.executions(handle.id, STEPS) == {"handler": 2, "a": 1, "b": 2, "c": 1}
    assert output["b"].startswith("b:2:") and output["c"].startswith("c:1:")
    # the new owner may finish before the old keeper's next renewal notices; then it does
    wait_until(lambda: f"run {handle.id} left to another worker (lease_lost)" in old.output(), timeout=10)
    assert f"lease lost for run {handle.id}" in old.output()
    witness.drain()
    assert witness.pushes[handle.id] == 1
    audit_runs(er, keys, [handle.id]).assert_each_finalized_exactly_once(statuses={"succeeded"})
    assert chaos_client.get_run(handle.id).attempt == 1


@pytest.mark.slow
def test_a_worker_frozen_past_its_lease_does_not_finalize_the_run_its_new_owner_finished(
    engine, er, chaos_client, workers, side, witness: FinalizeWitness
):
    keys = chaos_client.keys
    resumed = freeze_past_the_lease_and_resume(engine.url, er, chaos_client, workers, side)

    assert resumed.output["pid"] == resumed.new.proc.pid and resumed.output["b"].startswith("b:2:")
    assert er.hgetall(keys.run(resumed.run_id)) == resumed.run_at_finish  # status, finishedAt, output: untouched
    witness.drain()
    assert witness.pushes[resumed.run_id] == 1
    audit_runs(er, keys, [resumed.run_id]).assert_each_finalized_exactly_once(statuses={"succeeded"})
    assert alive(resumed.old)  # it carries on serving
