"""A stored step that is not JSON fails the run at once (CorruptDataError is not retried),
naming the step, and the step is not run over the record it cannot read."""

import pytest

from tests.chaos.harness import error_of, new_run_id


@pytest.mark.parametrize(
    "record", ['{"status":"succeeded","seq":1,"outputJson":"{nope"}', "{garbage"], ids=["output-not-json", "record-not-json"]
)
def test_a_stored_step_that_is_not_json_fails_the_run_at_once_naming_the_step(bench, record):
    run_id = new_run_id()
    bench.r.hset(bench.keys.run_steps(run_id), "s", record)  # before the run is queued: no race with the worker
    # A step record exists only after an attempt started the run (every worker counts attempts at start).
    bench.write_run(run_id, "stepper", fields={"attempt": "1"})
    final = bench.wait_terminal(run_id)
    assert final["status"] == "failed"
    assert error_of(final)["name"] == "CorruptDataError" and "step 's'" in error_of(final)["message"]
    assert final["attempt"] == "2" and bench.side.handler(run_id) == 1  # docs/guide/workflows.md: CorruptDataError is not retried
    assert bench.side.step("s", run_id) == 0  # nor is the step run over the record it cannot read
    bench.still_serves()
