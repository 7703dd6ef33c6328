"""Promise 8: cancellation, in every state a run can be in, and racing its end.

A cancel while queued, delayed, running or scheduled for a retry ends the
run ``canceled`` (once, and no further code of it runs); a cancel of a
finished (or unknown) run returns False and changes nothing. Racing a
run's completion, ``cancel()`` returns True exactly for the runs that end
canceled.
"""

import random
import time

import gevent
import pytest
from helpers import wait_until

from redflow import CanceledError
from tests.chaos.kit import prove_each_finalized_once, queue_leftovers

STEPS = ("a", "b", "c")


def test_a_run_canceled_while_queued_ends_canceled_and_never_runs(engine, er, chaos_client, workers, side, witness):
    keys = chaos_client.keys
    handle = chaos_client.run("journey", {})
    assert chaos_client.cancel(handle.id, reason="not needed") is True
    assert handle.status() == "canceled"
    workers.spawn(engine.url)  # it finds the stale queue entry and drops it
    wait_until(lambda: set(queue_leftovers(er, keys, ["default"]).values()) == {0}, timeout=20)
    assert side.executions(handle.id, STEPS) == {"handler": 0, "a": 0, "b": 0, "c": 0}
    with pytest.raises(CanceledError, match="not needed"):
        handle.result(timeout=1)
    prove_each_finalized_once(er, keys, [handle.id], witness=witness, statuses={"canceled"})


def test_a_delayed_run_canceled_before_it_is_due_is_never_promoted(engine, er, chaos_client, workers, side, witness):
    keys = chaos_client.keys
    workers.spawn(engine.url)
    handle = chaos_client.run("journey", {}, delay=1.0)
    assert handle.status() == "scheduled"
    assert chaos_client.cancel(handle.id) is True
    time.sleep(2.0)  # past its due time: the promoter must not pick it up
    assert handle.status() == "canceled" and side.handler(handle.id) == 0
    assert er.zscore(keys.queue_scheduled("default"), handle.id) is None
    prove_each_finalized_once(er, keys, [handle.id], witness=witness, statuses={"canceled"})


def test_a_run_canceled_while_running_stops_in_its_step_and_runs_nothing_after(engine, er, chaos_client, workers, side, witness, report):
    keys = chaos_client.keys
    workers.spawn(engine.url)
    handle = chaos_client.run("journey", {"hold": "step", "hold_s": 60})
    wait_until(lambda: side.step("b", handle.id) == 1, timeout=20, message="step b to start")
    asked_at = time.monotonic()
    assert chaos_client.cancel(handle.id, reason="stop it") is True
    with pytest.raises(CanceledError, match="stop it"):
        handle.result(timeout=20)
    report(f"running run canceled {time.monotonic() - asked_at:.2f}s after cancel()")
    gevent.sleep(0.5)
    assert side.executions(handle.id, STEPS) == {"handler": 1, "a": 1, "b": 1, "c": 0}
    assert chaos_client.get_run(handle.id).error["kind"] == "canceled"
    prove_each_finalized_once(er, keys, [handle.id], witness=witness, statuses={"canceled"})


def test_a_run_canceled_while_scheduled_for_a_retry_is_not_retried(engine, er, chaos_client, workers, side, witness):
    keys = chaos_client.keys
    workers.spawn(engine.url)
    handle = chaos_client.run("flaky", {})

    def third_attempt_waiting_for_retry():  # after attempt 3 the retry waits 1.0-1.1 s: room to cancel
        run = chaos_client.get_run(handle.id)
        return run.status == "scheduled" and run.attempt == 3

    wait_until(third_attempt_waiting_for_retry, timeout=20, interval=0.005)
    assert chaos_client.cancel(handle.id) is True
    assert handle.status() == "canceled"
    time.sleep(1.5)  # past the retry's due time
    run = chaos_client.get_run(handle.id)
    assert run.status == "canceled" and run.attempt == 3 and run.available_at is None
    assert side.handler(handle.id) == 3
    assert er.zscore(keys.queue_scheduled("default"), handle.id) is None
    prove_each_finalized_once(er, keys, [handle.id], witness=witness, statuses={"canceled"})


def test_cancel_of_a_finished_or_unknown_run_returns_false_and_changes_nothing(engine, er, chaos_client, workers, witness):
    keys = chaos_client.keys
    workers.spawn(engine.url)
    handle = chaos_client.run("journey", {})
    handle.result(timeout=20)
    before = er.hgetall(keys.run(handle.id))
    assert chaos_client.cancel(handle.id) is False
    assert er.hgetall(keys.run(handle.id)) == before
    assert chaos_client.cancel("run_00000000-0000-4000-8000-000000000000") is False
    prove_each_finalized_once(er, keys, [handle.id], witness=witness, statuses={"succeeded"})


def test_cancel_racing_the_end_of_300_runs_returns_true_exactly_for_those_that_end_canceled(
    engine, er, chaos_client, workers, witness, report
):
    keys = chaos_client.keys
    workers.spawn(engine.url, concurrency=50)
    ids = [h.id for h in chaos_client.run_many("journey", [{"nap_s": 0.1}] * 300)]
    rng = random.Random(8)
    answers: dict[str, bool] = {}

    def cancel_later(run_id: str) -> None:
        gevent.sleep(rng.uniform(0.0, 2.0))
        answers[run_id] = chaos_client.cancel(run_id)

    gevent.joinall([gevent.spawn(cancel_later, run_id) for run_id in ids], raise_error=True)
    for run_id in ids:
        chaos_client.wait_for(run_id, timeout=60)
    statuses = {run_id: er.hget(keys.run(run_id), "status") for run_id in ids}
    report(f"cancel() won for {sum(answers.values())} of 300 runs, lost for {300 - sum(answers.values())}")

    assert {run_id: statuses[run_id] == "canceled" for run_id in ids} == answers
    prove_each_finalized_once(er, keys, ids, witness=witness, statuses={"succeeded", "canceled"})
    wait_until(lambda: set(queue_leftovers(er, keys, ["default"]).values()) == {0}, timeout=20)
