"""The limits' invariant under every interleaving of the engine's scripts.

Invariant: a run holds a unit of each of its concurrency limits exactly
while it is running (the keyed limit's units set is exactly its key's
running runs, and the workflow's counter counts its running runs), so a unit
is taken once and given back once, whatever ends or leaves the run; and no
run is stuck (tests/invariants.py: a queued run may wait in a held list).

The state machine is the recovery invariant's (tests/test_recovery_invariant.py:
claims, starts, step records, settles that claim the next run, lease lapses,
kills, the reaper, the promoter, the sweeper, cancel, retry) with runs of a
workflow limited to 2 at once and 1 per key added, plus cancels and retries
of those and the limits sweeper's heal. Its teardown proves liveness: once
the faults stop, one healthy slot ends every run, so no held run missed the
wake-up of a unit given back.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule, run_state_machine_as_test
from test_recovery_invariant import PROPERTY_SETTINGS, Interleavings, _workflows

from redflow import Concurrency, Registry, create_client, define_workflow

KEYS = ("a", "a", "b", "b")


def _limited() -> Registry:
    registry = _workflows()

    @define_workflow("capped", registry=registry, concurrency=[Concurrency(limit=2), Concurrency(limit=1, key=lambda input: input["k"])])
    def capped(ctx):
        return None

    return registry


class LimitedInterleavings(Interleavings):
    """The recovery invariant's interleavings, with limited runs among the runs."""

    def __init__(self) -> None:
        super().__init__()
        prefix = self.client.prefix
        self.client.close()
        self.client = create_client(self.url, prefix=prefix, registry=_limited())
        self.keys, self.scripts = self.client.keys, self.client.scripts
        self.limited_ids = [self.client.run("capped", {"k": k}).id for k in KEYS]
        self.run_ids += self.limited_ids

    @rule(run=st.integers(0, len(KEYS) - 1))
    def cancel_limited(self, run: int) -> None:
        self.client.cancel(self.limited_ids[run])

    @rule(run=st.integers(0, len(KEYS) - 1))
    def retry_limited(self, run: int) -> None:
        if self.client.retry(self.limited_ids[run]):
            self.first_terminal.pop(self.limited_ids[run], None)

    @rule()
    def heal(self) -> None:
        """The limits sweeper's pass (without its lock)."""
        for held_key in self.r.hkeys(self.keys.limits_held_index()):
            self.scripts.heal_limit(held_key=held_key, queue="default")

    @invariant()
    def a_run_holds_its_units_exactly_while_it_runs(self) -> None:
        statuses = {run_id: self.r.hget(self.keys.run(run_id), "status") for run_id in self.limited_ids}
        running = {run_id for run_id, status in statuses.items() if status == "running"}
        assert int(self.r.get(self.keys.workflow_running("capped")) or 0) == len(running), statuses
        for key in set(KEYS):
            holders = self.r.smembers(self.keys.limit_units("capped", 1, key))
            assert holders == {run_id for run_id, k in zip(self.limited_ids, KEYS) if k == key and run_id in running}, statuses


@pytest.mark.slow
def test_random_interleavings_keep_units_with_running_runs_and_wake_every_held_run(redis_url):
    """75 random interleavings of 40 steps (150 with REDFLOW_LONG_TESTS=1), the invariants checked after every step."""
    LimitedInterleavings.url = redis_url
    run_state_machine_as_test(LimitedInterleavings, settings=PROPERTY_SETTINGS)
