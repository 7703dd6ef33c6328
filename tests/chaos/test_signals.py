"""Signals and emit_workflow on worker subprocesses killed at the worst moments (issue 31).

- A worker SIGKILLed right after its wait took a signal (the take and the
  step's record are one script): the run, recovered by another worker,
  replays the same payload from the record and its next wait takes the next
  signal; no signal is taken twice or lost.
- A worker SIGKILLed after ``emit_workflow`` started a run and before the
  step's record: the recovered parent gets the same run's id back, and no
  second run starts, though that run has failed meanwhile.
"""

from __future__ import annotations

import pytest
from helpers import wait_until

from redflow import create_client
from tests.chaos.apps.side import die_after_register_key
from tests.chaos.apps.signals_app import registry as signals_registry
from tests.chaos.kit import audit_runs, decode_steps, watched

APP = "signals_app"


@pytest.fixture
def client(engine, prefix):
    c = watched(create_client(engine.url, prefix=prefix, registry=signals_registry))
    yield c
    c.close()


@pytest.mark.slow
def test_a_worker_killed_right_after_taking_a_signal_loses_none_and_takes_none_twice(engine, er, client, workers, side, witness):
    handle = client.run("approver")
    assert client.signal(handle.id, "approve", {"n": 1}) and client.signal(handle.id, "approve", {"n": 2})
    side.side.sadd(die_after_register_key(client.prefix), handle.id)
    doomed = workers.spawn(engine.url, app="dying_signals_app", concurrency=2, ready=False)
    assert doomed.wait(30) == -9  # SIGKILLed by itself: the first signal taken, the handler never went on
    steps = decode_steps(er, client.keys, handle.id)
    assert list(steps) == ["signal:approve"] and steps["signal:approve"]["outputJson"] == '{"n":1}'
    assert er.hgetall(client.keys.run_signals(handle.id)) == {"t:approve": "2", "h:approve": "1", "2:approve": '{"n":2}', "n": "1"}
    assert client.get_run(handle.id).status == "running"
    workers.spawn(engine.url, app=APP, concurrency=2)

    assert handle.result(30) == [{"n": 1}, {"n": 2}]
    assert side.handler(handle.id) == 2
    assert er.exists(client.keys.run_signals(handle.id)) == 0  # both taken, once each
    witness.drain()
    audit_runs(er, client.keys, [handle.id]).assert_each_finalized_exactly_once(statuses={"succeeded"})


@pytest.mark.slow
def test_a_worker_killed_between_an_emit_and_its_record_starts_no_second_run(engine, er, client, workers, side, witness):
    handle = client.run("emitter", {"to": "a@b"})
    side.side.sadd(die_after_register_key(client.prefix), handle.id)
    doomed = workers.spawn(engine.url, app="dying_signals_app", concurrency=2, ready=False)
    assert doomed.wait(30) == -9  # the run was started, the step's record never written
    assert "notify" not in decode_steps(er, client.keys, handle.id)
    emitted = [run.id for run in client.list_runs(workflow="notify")]
    assert len(emitted) == 1
    workers.spawn(engine.url, app=APP, concurrency=2)

    assert handle.result(30) == emitted[0]
    wait_until(lambda: client.get_run(emitted[0]).status == "failed", timeout=30, message="the emitted run to fail")
    assert [run.id for run in client.list_runs(workflow="notify")] == emitted and side.handler(emitted[0]) == 1
    assert client.list_children(handle.id) == [] and client.get_run(emitted[0]).parent_run_id == handle.id
    witness.drain()
    audit_runs(er, client.keys, [handle.id, *emitted]).assert_each_finalized_exactly_once(statuses={"succeeded", "failed"})
