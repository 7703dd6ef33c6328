"""Singleton keys and debounce windows under every interleaving of the engine's scripts.

Invariant (tests/invariants.py, ``one_run_key_breaches``): a singleton key is held
iff its run is unfinished (a run a "replace" canceled may run on until its worker
stops it: then the key names the new run); a debounce window exists iff its run is
still scheduled and never started. So no key or window is leaked, whatever ends,
leaves or deletes a run.

The state machine is the recovery invariant's (tests/test_recovery_invariant.py:
claims, starts, step records, settles that claim the next run, lease lapses,
kills, the reaper, the promoter, the sweeper, cancel, retry) with runs of a
singleton workflow ("skip"), a singleton "replace" one and a debounced one added
by clients calling them with a few keys, plus cancels and retries of any run,
and purges (the script retention deletes runs with too). Its teardown proves
liveness: once the faults stop, one healthy slot ends every run, and then no
key or window is left at all.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule, run_state_machine_as_test
from invariants import machine_settings, one_run_key_breaches
from test_recovery_invariant import Interleavings, _workflows

from redflow import Debounce, Registry, Singleton, create_client, define_workflow

ONE_RUN_KEYS = ("a", "b")
WORKFLOWS = ("unique", "latest", "quiet")


def _one_run() -> Registry:
    registry = _workflows()

    @define_workflow("unique", registry=registry, singleton=Singleton(key=lambda input: input["k"]))
    def unique(ctx):
        return None

    @define_workflow("latest", registry=registry, singleton=Singleton(key=lambda input: input["k"], on_conflict="replace"))
    def latest(ctx):
        return None

    @define_workflow("quiet", registry=registry, debounce=Debounce(period=0.001, key=lambda input: input["k"]))
    def quiet(ctx):
        return None

    return registry


class OneRunInterleavings(Interleavings):
    """The recovery invariant's interleavings, with singleton and debounced runs among the runs."""

    def __init__(self) -> None:
        super().__init__()
        prefix = self.client.prefix
        self.client.close()
        self.client = create_client(self.url, prefix=prefix, registry=_one_run())
        self.keys, self.scripts = self.client.keys, self.client.scripts
        self.names = [self.keys.singleton(wf, k) for wf in WORKFLOWS[:2] for k in ONE_RUN_KEYS]
        self.names += [self.keys.debounce("quiet", k) for k in ONE_RUN_KEYS]

    @rule(workflow=st.sampled_from(WORKFLOWS), key=st.sampled_from(ONE_RUN_KEYS))
    def call(self, workflow: str, key: str) -> None:
        """A client's run: a new run, or the key's (skipped, collapsed), or a replace."""
        run_id = self.client.run(workflow, {"k": key}).id
        if run_id not in self.run_ids:
            self.run_ids.append(run_id)

    @rule(run=st.integers(0, 63))
    def cancel_any(self, run: int) -> None:
        self.client.cancel(self.run_ids[run % len(self.run_ids)])

    @rule(run=st.integers(0, 63))
    def retry_any(self, run: int) -> None:
        run_id = self.run_ids[run % len(self.run_ids)]
        if self.client.retry(run_id):
            self.first_terminal.pop(run_id, None)

    @rule()
    def purge(self) -> None:
        """Delete every finished run (what retention does past its age, through the same script)."""
        if self.client.purge(0):
            for run_id in self.run_ids:
                if not self.r.exists(self.keys.run(run_id)):
                    self.purged.add(run_id)
                    self.first_terminal.pop(run_id, None)

    @invariant()
    def a_key_is_held_iff_its_run_is_unfinished_and_a_window_open_iff_its_run_is_scheduled(self) -> None:
        assert one_run_key_breaches(self.r, self.keys, self.names) == {}

    def ended(self) -> None:
        """Every run ended: no key or window is left."""
        assert {name: self.r.get(name) for name in self.names if self.r.exists(name)} == {}


#: Cheaper than the recovery machine's budget: its rules call the enqueue pipeline (a few round trips each).
SETTINGS = machine_settings(bounded_examples=int(os.environ.get("ONE_RUN_EXAMPLES", "40")), long_examples=150, step_count=40)


@pytest.mark.slow
def test_random_interleavings_never_leak_a_singleton_key_or_a_debounce_window(redis_url):
    """40 random interleavings of 40 steps (150 with REDFLOW_LONG_TESTS=1), the invariant checked after every step."""
    OneRunInterleavings.url = redis_url
    run_state_machine_as_test(OneRunInterleavings, settings=SETTINGS)
