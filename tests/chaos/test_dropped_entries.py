"""A queue entry the worker throws away (no run hash, or one without a status)
is reported in the worker log at WARNING, with its id, so that work never vanishes silently."""

import time

import pytest
from helpers import wait_until

from tests.chaos.harness import UNRUNNABLE_ENTRIES


@pytest.mark.parametrize("case", UNRUNNABLE_ENTRIES)
def test_a_dropped_queue_entry_is_reported_in_the_worker_log(bench, case):
    run_id, _ = bench.push_unrunnable(case)
    wait_until(lambda: not bench.in_queue(run_id), timeout=20, message="the entry to be dropped")
    time.sleep(0.2)
    assert run_id in bench.worker.output()  # an operator can see what was thrown away, and why
