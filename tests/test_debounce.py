"""Debounce (issue 30 item 4): calls for one key within ``period`` collapse into one scheduled run.

The run is a scheduled run whose due time moves (the promoter starts it, by
Redis's clock); the tests assert stored times against each other, never
durations. Invariant: a debounce window exists iff its run is still scheduled
(``assert_one_run_keys``).
"""

from __future__ import annotations

from datetime import timedelta

import gevent
import pytest
from gevent.event import Event
from invariants import assert_one_run_keys

from redflow import Debounce, RedflowError, Singleton, define_workflow
from redflow.core.models import RunField


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (lambda: {"debounce": Debounce(period=0)}, "Debounce: period must be a finite number of seconds > 0"),
        (lambda: {"debounce": Debounce(period="5s")}, "Debounce: period must be a finite number of seconds > 0"),
        (lambda: {"debounce": Debounce(period=float("nan"))}, "Debounce: period must be a finite number of seconds > 0"),
        (lambda: {"debounce": Debounce(period=5, max_wait=-1)}, "Debounce: max_wait must be a finite number of seconds > 0"),
        (lambda: {"debounce": Debounce(period=5, max_wait=1)}, r"Debounce: max_wait \(1\) must be at least the period \(5\)"),
        (lambda: {"debounce": Debounce(period=5, key="")}, "Debounce: key must be a function of the input or a non-empty string"),
        (lambda: {"debounce": 5.0}, "workflow 'bad': debounce must be a Debounce"),
        (
            lambda: {"debounce": Debounce(period=5), "singleton": Singleton("k")},
            "workflow 'bad': singleton= and debounce= are exclusive",
        ),
    ],
    ids=["zero period", "text period", "nan period", "negative max_wait", "max_wait under period", "empty key", "not a Debounce", "both"],
)
def test_bad_debounce_arguments_are_a_clear_error_at_define_time(registry, options, message):
    with pytest.raises(RedflowError, match=message):
        define_workflow("bad", registry=registry, **options())
    assert "bad" not in registry


def test_calls_within_the_period_collapse_into_one_scheduled_run_with_the_last_input(registry, client, r):
    @define_workflow("index", registry=registry, debounce=Debounce(period=timedelta(minutes=1), key=lambda i: i["doc"]))
    def index(ctx):
        return ctx.input

    first = index.run({"doc": "a", "v": 1}, client=client)
    due_first = int(r.hget(client.keys.run(first.id), RunField.AVAILABLE_AT))
    created = int(r.hget(client.keys.run(first.id), RunField.CREATED_AT))
    assert due_first == created + 60_000
    assert index.run({"doc": "a", "v": 2}, client=client).id == first.id
    assert index.run({"doc": "a", "v": 3}, client=client).id == first.id
    assert index.run({"doc": "b", "v": 1}, client=client).id != first.id  # another key, another window
    run = client.get_run(first.id)
    assert (run.status, run.input, run.collapsed_calls, run.debounce) == ("scheduled", {"doc": "a", "v": 3}, 2, "60000:")
    assert run.available_at is not None and run.available_at * 1000 >= due_first  # the due time only moves later
    assert r.zscore(client.keys.queue_scheduled("default"), first.id) == run.available_at * 1000
    assert r.get(client.keys.debounce("index", "a")) == first.id
    with pytest.raises(RedflowError, match="is debounced: its runs start `period` after the last call"):
        index.run({"doc": "a"}, client=client, delay=5)
    assert_one_run_keys(r, client.keys)


def test_max_wait_bounds_how_far_the_due_time_moves_and_start_within_moves_with_it(registry, client, r):
    @define_workflow("bounded", registry=registry, debounce=Debounce(period=30, max_wait=45), start_within=10)
    def bounded(ctx):
        return None

    handle = bounded.run(1, client=client)
    run_key = client.keys.run(handle.id)
    created = int(r.hget(run_key, RunField.CREATED_AT)) - 40_000
    r.hset(run_key, RunField.CREATED_AT, created)  # as if the first call was 40 s ago
    assert bounded.run(2, client=client).id == handle.id
    due = int(r.hget(run_key, RunField.AVAILABLE_AT))
    assert due == created + 45_000  # not 30 s after this call: 45 s after the first
    assert int(r.hget(run_key, RunField.START_BY)) == due + 10_000
    assert r.zscore(client.keys.queue_scheduled("default"), handle.id) == due


def test_the_run_starts_after_the_period_with_the_last_input_and_then_a_new_window_opens(registry, client, r, start):
    @define_workflow("later", registry=registry, debounce=Debounce(period=0.3))
    def later(ctx):
        return ctx.input

    handles = [later.run(n, client=client) for n in range(5)]
    assert len({h.id for h in handles}) == 1
    start()
    assert handles[0].result(15) == 4
    assert r.get(client.keys.debounce("later", "")) is None  # promoted: the window closed
    assert later.run(9, client=client).id != handles[0].id
    assert_one_run_keys(r, client.keys)


def test_a_canceled_or_purged_debounced_run_closes_its_window(registry, client, r):
    @define_workflow("gone", registry=registry, debounce=Debounce(period=60, key="all"))
    def gone(ctx):
        return None

    first = gone.run(1, client=client)
    assert client.cancel(first.id)
    assert r.get(client.keys.debounce("gone", "all")) is None
    second = gone.run(2, client=client)
    assert second.id != first.id
    # a run whose window another client's worker left behind (promoted and ended it without closing it)
    r.hset(client.keys.run(second.id), mapping={RunField.STATUS: "succeeded", RunField.FINISHED_AT: "1"})
    third = gone.run(3, client=client)
    assert third.id != second.id  # a window naming a run no longer scheduled counts as closed
    assert r.get(client.keys.debounce("gone", "all")) == third.id
    assert_one_run_keys(r, client.keys)


def test_many_greenlets_calling_at_once_collapse_into_one_run(registry, client, r):
    @define_workflow("burst", registry=registry, debounce=Debounce(period=60, key=lambda i: i["k"]))
    def burst(ctx):
        return None

    gate = Event()

    def call(n):
        gate.wait()
        return burst.run({"k": "x", "n": n}, client=client).id

    greenlets = [gevent.spawn(call, n) for n in range(30)]
    gevent.sleep(0)
    gate.set()
    assert len({g.get(timeout=10) for g in greenlets}) == 1
    assert r.zcard(client.keys.workflow_runs("burst")) == 1
    run = client.get_run(r.get(client.keys.debounce("burst", "x")))
    assert run.collapsed_calls == 29
    assert_one_run_keys(r, client.keys)


def test_a_call_to_another_queue_gets_a_run_there_and_the_window_moves_to_it(registry, client, r):
    @define_workflow("routed", registry=registry, debounce=Debounce(period=60))
    def routed(ctx):
        return None

    first = routed.run(1, client=client)
    other = routed.run(2, client=client, queue="elsewhere")
    assert other.id != first.id
    assert r.zscore(client.keys.queue_scheduled("elsewhere"), other.id) is not None
    assert r.zscore(client.keys.queue_scheduled("elsewhere"), first.id) is None  # never moved into another queue's zset
    assert routed.run(3, client=client, queue="elsewhere").id == other.id
