"""Durable waits and fan-out on worker subprocesses (issue 17).

A parked run holds no slot and no lease: it is ``scheduled`` in Redis, so a
``-c 1`` worker runs other work meanwhile, and a worker killed while one of
its runs sleeps loses nothing (another worker's promoter finds it when it is
due). Executions are counted in the side channel; every run is audited
finalized exactly once.
"""

from __future__ import annotations

import signal
import time

import pytest
from helpers import wait_until

from redflow import CanceledError, RunFailedError, create_client
from tests.chaos.apps.side import die_after_register_key
from tests.chaos.apps.waits_app import registry as waits_registry
from tests.chaos.kit import audit_runs, decode_steps, queue_leftovers, watched

APP = "waits_app"


@pytest.fixture
def client(engine, prefix):
    c = watched(create_client(engine.url, prefix=prefix, registry=waits_registry))
    yield c
    c.close()


def parked(client, run_id: str, reason: str) -> bool:
    run = client.get_run(run_id)
    return run is not None and run.status == "scheduled" and run.parked_for == reason


def test_a_run_sleeping_on_a_one_slot_worker_lets_twenty_runs_through_then_finishes_with_its_steps_run_once(
    engine, er, client, workers, side, witness, report
):
    workers.spawn(engine.url, app=APP, concurrency=1)
    sleeper = client.run("napper", {"s": 2})
    wait_until(lambda: parked(client, sleeper.id, "sleep"), timeout=30, message="the sleeper to park")
    others = client.run_many("quick", list(range(20)))  # queued ahead of the sleeper's wake-up (FIFO)
    assert [h.result(30) for h in others] == list(range(20))
    output = sleeper.result(30)

    assert side.executions(sleeper.id, ("a", "b")) == {"handler": 2, "a": 1, "b": 1}
    assert output["a"].startswith("a:1:") and output["b"].startswith("b:1:") and output["attempt"] == 1
    steps = decode_steps(er, client.keys, sleeper.id)
    assert steps["nap"]["finishedAt"] >= steps["nap"]["startedAt"] + 2000
    last_other = max(client.get_run(h.id).finished_at for h in others)
    assert last_other * 1000 <= steps["b"]["startedAt"]  # the one slot ran them while the sleeper was parked
    report(f"20 runs done {steps['nap']['finishedAt'] - last_other * 1000:.0f} ms before the sleeper woke")
    witness.drain()
    ids = [sleeper.id, *(h.id for h in others)]
    assert witness.finalized_more_than_once(ids) == {}
    audit_runs(er, client.keys, ids).assert_each_finalized_exactly_once(statuses={"succeeded"})


@pytest.mark.slow
def test_a_worker_killed_while_its_run_sleeps_loses_nothing_another_finishes_it_after_the_wake_time(
    engine, er, client, workers, side, witness
):
    doomed = workers.spawn(engine.url, app=APP, concurrency=2)
    handle = client.run("napper", {"s": 3})
    wait_until(lambda: parked(client, handle.id, "sleep"), timeout=30, message="the run to park")
    doomed.kill()
    rescuer = workers.spawn(engine.url, app=APP, concurrency=2)
    output = handle.result(60)

    assert output["pid"] == rescuer.proc.pid and output["attempt"] == 1
    assert side.executions(handle.id, ("a", "b")) == {"handler": 2, "a": 1, "b": 1}
    steps = decode_steps(er, client.keys, handle.id)
    assert steps["b"]["startedAt"] >= steps["nap"]["finishedAt"] >= steps["nap"]["startedAt"] + 3000  # after the wake time
    witness.drain()
    audit_runs(er, client.keys, [handle.id]).assert_each_finalized_exactly_once(statuses={"succeeded"})
    assert set(queue_leftovers(er, client.keys, ["default"]).values()) == {0}


def test_a_hundred_runs_waiting_on_distinct_keys_each_resume_once(engine, er, client, workers, side, witness):
    workers.spawn(engine.url, app=APP, concurrency=8)
    handles = [client.run("approval", {"order": i}) for i in range(100)]
    waiters = client.keys.event_waiters("order.approved")
    wait_until(lambda: er.hlen(waiters) == 100 and client.count_runs("scheduled") == 100, timeout=60, message="100 parked waiters")
    for i in range(100):
        client.emit_event("order.approved", {"order": i, "ok": True})
    assert [h.result(60) for h in handles] == [{"order": i, "ok": True} for i in range(100)]
    assert [side.handler(h.id) for h in handles] == [2] * 100
    assert er.hlen(waiters) == 0
    witness.drain()
    audit_runs(er, client.keys, [h.id for h in handles]).assert_each_finalized_exactly_once(statuses={"succeeded"})


def test_an_event_emitted_after_the_waiter_entry_reaches_the_run_though_its_worker_died_before_parking(
    engine, er, client, workers, side, witness
):
    # a wait long enough that the emit below comes before its end on a loaded machine (4 s did not,
    # once: the doomed worker's start and self-kill took longer); a lost event still fails the test (None)
    handle = client.run("approval", {"order": 1, "timeout": 20})
    side.side.sadd(die_after_register_key(client.prefix), handle.id)
    doomed = workers.spawn(engine.url, app="dying_waits_app", concurrency=2, ready=False)
    assert doomed.wait(30) == -9  # SIGKILLed by itself: the entry is written, the park's settle never ran
    assert er.hexists(client.keys.event_waiters("order.approved"), handle.id)
    assert client.get_run(handle.id).status == "running"
    client.emit_event("order.approved", {"order": 1, "by": "ada"})  # after the wait began
    workers.spawn(engine.url, app=APP, concurrency=2)

    assert handle.result(30) == {"order": 1, "by": "ada"}  # not None: the timeout did not win
    assert side.handler(handle.id) == 2
    assert er.hlen(client.keys.event_waiters("order.approved")) == 0
    witness.drain()
    audit_runs(er, client.keys, [handle.id]).assert_each_finalized_exactly_once(statuses={"succeeded"})


def test_fifty_children_on_a_four_slot_worker_come_back_in_input_order_each_run_once(engine, er, client, workers, side, witness, report):
    workers.spawn(engine.url, app=APP, concurrency=4)
    began = time.monotonic()
    handle = client.run("fan", {"count": 50})
    assert handle.result(120) == [2 * n for n in range(50)]
    report(f"50 children on -c 4: {time.monotonic() - began:.2f}s")
    children = client.list_children(handle.id)
    assert len(children) == 50
    assert [side.executions(c, ("double",)) for c in children] == [{"handler": 1, "double": 1}] * 50
    witness.drain()
    audit_runs(er, client.keys, [handle.id, *children]).assert_each_finalized_exactly_once(statuses={"succeeded"})


def test_a_retried_parent_starts_no_child_twice_and_a_failed_child_is_named(engine, er, client, workers, side):
    workers.spawn(engine.url, app=APP, concurrency=4)
    retried = client.run("fan", {"count": 10, "flaky": True})
    failing = client.run("fan", {"count": 6, "fail": [4]}, max_attempts=1)
    assert retried.result(60) == [2 * n for n in range(10)]
    assert client.get_run(retried.id).attempt == 2
    assert [side.handler(c) for c in client.list_children(retried.id)] == [1] * 10
    with pytest.raises(RunFailedError) as raised:
        failing.result(60)
    refused = [c for c in client.list_children(failing.id) if client.get_run(c).status == "failed"]
    assert len(refused) == 1 and refused[0] in raised.value.error["message"]
    parent_end = client.get_run(failing.id).finished_at
    assert all(client.get_run(c).finished_at <= parent_end for c in client.list_children(failing.id))


def test_canceling_a_parent_cancels_its_ten_running_children(engine, er, client, workers, side):
    workers.spawn(engine.url, app=APP, concurrency=12)
    handle = client.run("boss", {"count": 10})
    wait_until(lambda: len(side.handlers()) == 10, timeout=30, message="10 children holding their slots")
    children = client.list_children(handle.id)
    assert len(children) == 10 and all(client.get_run(c).status == "running" for c in children)
    assert client.cancel(handle.id, reason="stop")
    with pytest.raises(CanceledError):
        handle.result(10)
    wait_until(lambda: all(client.get_run(c).status == "canceled" for c in children), timeout=30, message="every child canceled")
    assert set(queue_leftovers(er, client.keys, ["default"]).values()) == {0}


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_parents_canceled_while_their_worker_is_frozen_past_its_lease_start_no_child_when_it_wakes(engine, er, client, workers, side):
    old = workers.spawn(engine.url, app=APP, concurrency=8)
    parents = [client.run("slow_fan", {"count": 5, "hold_s": 3}) for _ in range(5)]
    wait_until(lambda: all(er.hexists(client.keys.run_steps(p.id), "a") for p in parents), timeout=30, message="every parent past a")
    old.signal(signal.SIGSTOP)  # in its pause before run_workflows
    try:
        time.sleep(2.5)  # past the 1 s lease
        assert all(client.cancel(p.id) for p in parents)  # no lease held: canceled at once, no child yet
        workers.spawn(engine.url, app=APP, concurrency=8)  # would run any child started from now on
    finally:
        old.signal(signal.SIGCONT)
    ended = [f"run {p.id} canceled" for p in parents] + [f"run {p.id} left to another worker" for p in parents]
    wait_until(lambda: sum(line in old.output() for line in ended) == len(parents), timeout=20, message="the old attempts to end")
    time.sleep(1.0)  # a child started anyway would have run by now

    assert [client.list_children(p.id) for p in parents] == [[]] * len(parents)
    assert side.handlers() == {p.id: 1 for p in parents}  # no child ran, no parent ran again
    assert {client.get_run(p.id).status for p in parents} == {"canceled"}
