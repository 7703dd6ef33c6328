"""A worker frozen past its lease, whose run a new owner finished meanwhile,
records no step and runs no further step when it wakes (writes are fenced:
only the lease holder, or an attempt whose lapsed lease nobody took over, may
write; and an attempt whose lease may have lapsed confirms it still owns its
run before it starts a step)."""

import pytest

from tests.chaos.harness import freeze_past_the_lease_and_resume

STEPS = ("a", "b", "c")


@pytest.mark.slow
def test_a_worker_frozen_past_its_lease_records_no_step_and_runs_no_step_after_it_wakes(engine, er, chaos_client, workers, side):
    keys = chaos_client.keys
    resumed = freeze_past_the_lease_and_resume(engine.url, er, chaos_client, workers, side)

    assert er.hgetall(keys.run_steps(resumed.run_id)) == resumed.steps_at_finish  # no stale record over the new owner's
    assert side.executions(resumed.run_id, STEPS) == {"handler": 2, "a": 1, "b": 2, "c": 1}


def test_a_worker_frozen_between_two_steps_past_its_lease_runs_no_further_step_after_it_wakes(engine, er, chaos_client, workers, side):
    keys = chaos_client.keys
    resumed = freeze_past_the_lease_and_resume(engine.url, er, chaos_client, workers, side, hold="between")

    assert er.hgetall(keys.run_steps(resumed.run_id)) == resumed.steps_at_finish
    assert side.executions(resumed.run_id, STEPS) == {"handler": 2, "a": 1, "b": 1, "c": 1}  # b and c: the new owner's only
