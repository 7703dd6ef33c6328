"""Singleton (issue 30 item 3): at most one unfinished run per key, decided in the enqueue script.

Invariant: a singleton key is held iff its run is unfinished. Each test ends
by checking it (``assert_keys_agree``: every singleton key names an unfinished
run, and every unfinished singleton run is named by its key); the state machine
of tests/test_recovery_invariant.py checks it under kills, reaps and retakes.
"""

from __future__ import annotations

from datetime import timedelta

import gevent
import pytest
from gevent.event import Event
from helpers import wait_until
from invariants import assert_one_run_keys

from redflow import Debounce, RedflowError, Registry, RetryPolicy, Singleton, create_client, define_workflow
from redflow.core.models import RunField


@pytest.mark.parametrize(
    ("singleton", "message"),
    [
        (lambda: Singleton(key=""), "Singleton: key must be a function of the input or a non-empty string"),
        (lambda: Singleton(key=3), "Singleton: key must be a function of the input or a non-empty string"),
        (lambda: Singleton(key="k", on_conflict="queue"), "on_conflict must be 'skip' or 'replace'"),
        (lambda: "account", "workflow 'bad': singleton must be a Singleton"),
    ],
    ids=["empty key", "not a key", "bad on_conflict", "not a Singleton"],
)
def test_bad_singleton_arguments_are_a_clear_error_at_define_time(registry, singleton, message):
    with pytest.raises(RedflowError, match=message):
        define_workflow("bad", registry=registry, singleton=singleton())
    assert "bad" not in registry


def test_many_greenlets_enqueuing_one_key_at_once_get_exactly_one_run(registry, client, r, redis_url, prefix):
    @define_workflow("sync", registry=registry, singleton=Singleton(key=lambda i: i["account"]))
    def sync(ctx):
        return None

    # two clients, so that the race is between connections too, not only greenlets of one
    other = create_client(redis_url, prefix=prefix, registry=registry)
    gate = Event()

    def enqueue(n):
        gate.wait()
        return (client if n % 2 else other).run(sync, {"account": "42", "n": n}).id

    greenlets = [gevent.spawn(enqueue, n) for n in range(40)]
    gevent.sleep(0)
    gate.set()
    ids = {g.get(timeout=10) for g in greenlets}
    other.close()
    assert len(ids) == 1
    (run_id,) = ids
    assert r.zcard(client.keys.workflow_runs("sync")) == 1
    assert r.get(client.keys.singleton("sync", "42")) == run_id
    assert r.hget(client.keys.run(run_id), RunField.SKIPPED_CALLS) == "39"
    assert client.run(sync, {"account": "7"}).id != run_id  # another key: its own run
    assert_one_run_keys(r, client.keys)


def test_skip_returns_the_unfinished_run_and_the_key_is_let_go_when_it_ends(registry, client, r, start):
    release = Event()

    @define_workflow("one", registry=registry, singleton=Singleton("everything"))
    def one(ctx):
        ctx.step.run("wait", release.wait)
        return ctx.input

    start()
    first = one.run({"n": 1}, client=client)
    wait_until(lambda: client.get_run(first.id).status == "running")
    assert one.run({"n": 2}, client=client).id == first.id  # running: skipped
    release.set()
    assert first.result(15) == {"n": 1}
    assert r.get(client.keys.singleton("one", "everything")) is None
    second = one.run({"n": 3}, client=client)
    assert second.id != first.id and second.result(15) == {"n": 3}
    assert_one_run_keys(r, client.keys)


@pytest.mark.parametrize("end", ["failed", "canceled", "expired", "purged"])
def test_the_key_is_let_go_however_the_run_ends(registry, client, r, start, end):
    @define_workflow(
        "ends", registry=registry, singleton=Singleton(key=lambda i: "k"), retry=RetryPolicy(max_attempts=1), start_within=0.05
    )
    def ends(ctx):
        if ctx.input == "fail":
            raise ValueError("no")
        return None

    if end == "failed":
        start()
        handle = ends.run("fail", client=client)
        wait_until(lambda: client.get_run(handle.id).status == "failed")
    elif end == "canceled":
        handle = ends.run("x", client=client, delay=60)  # scheduled
        assert client.cancel(handle.id)
    elif end == "expired":
        handle = ends.run("x", client=client)
        wait_until(lambda: client.now_ms() > int(r.hget(client.keys.run(handle.id), RunField.START_BY)))
        start()
        wait_until(lambda: client.get_run(handle.id).status == "failed")
        assert client.get_run(handle.id).deadline_exceeded == "start"
    else:
        handle = ends.run("x", client=client, delay=60)
        r.hset(client.keys.run(handle.id), mapping={RunField.STATUS: "succeeded", RunField.FINISHED_AT: "1"})  # another client's worker
        assert r.get(client.keys.singleton("ends", "k")) == handle.id
        assert client.purge(0, workflow="ends") == 1
    assert r.get(client.keys.singleton("ends", "k")) is None
    assert ends.run("x", client=client, delay=60).id != handle.id
    assert_one_run_keys(r, client.keys)


def test_replace_cancels_the_running_run_and_enqueues_the_new_one(registry, client, r, start):
    @define_workflow("latest", registry=registry, singleton=Singleton(key=lambda i: i["doc"], on_conflict="replace"))
    def latest(ctx):
        ctx.step.run("slow", lambda: gevent.sleep(60) if ctx.input["v"] == 1 else None)
        return ctx.input["v"]

    start()
    first = latest.run({"doc": "a", "v": 1}, client=client)
    wait_until(lambda: client.get_run(first.id).status == "running")
    second = latest.run({"doc": "a", "v": 2}, client=client)
    assert second.id != first.id
    assert r.get(client.keys.singleton("latest", "a")) == second.id
    assert second.result(15) == 2
    wait_until(lambda: client.get_run(first.id).status == "canceled")
    assert "replaced" in (client.get_run(first.id).cancel_reason or "")
    assert r.get(client.keys.singleton("latest", "a")) is None  # the canceled run's end did not let go of the new one's key
    assert_one_run_keys(r, client.keys)


def test_a_manual_retry_takes_the_key_again_or_is_refused_while_another_run_holds_it(registry, client, r):
    @define_workflow("retried", registry=registry, singleton=Singleton("k"))
    def retried(ctx):
        return None

    first = retried.run(None, client=client, delay=60)
    assert client.cancel(first.id)
    second = retried.run(None, client=client, delay=60)
    assert not client.retry(first.id)  # the second holds the key
    assert client.cancel(second.id)
    assert client.retry(first.id)
    assert r.get(client.keys.singleton("retried", "k")) == first.id
    assert_one_run_keys(r, client.keys)


def test_a_key_function_that_fails_or_returns_no_string_is_a_clear_error_and_starts_nothing(registry, client, r):
    @define_workflow("keyed", registry=registry, singleton=Singleton(key=lambda i: i["k"]))
    def keyed(ctx):
        return None

    with pytest.raises(RedflowError, match="workflow 'keyed': its singleton key function failed on the input"):
        keyed.run({}, client=client)
    with pytest.raises(RedflowError, match="must return a non-empty string, got None"):
        keyed.run({"k": None}, client=client)
    assert keyed.run({"k": 5}, client=client).id  # an int is a key
    assert r.zcard(client.keys.workflow_runs("keyed")) == 1


def test_timedelta_options_and_run_many_of_a_singleton(registry, client, r):
    @define_workflow("many", registry=registry, singleton=Singleton(key=lambda i: str(i % 2)), timeout=timedelta(minutes=1))
    def many(ctx):
        return None

    handles = client.run_many(many, list(range(10)))
    assert len({h.id for h in handles}) == 2
    assert r.zcard(client.keys.workflow_runs("many")) == 2
    assert_one_run_keys(r, client.keys)


def test_a_client_without_the_code_applies_a_synced_singleton_or_debounce_by_name(registry, client, r, redis_url, prefix):
    @define_workflow("constant", registry=registry, singleton=Singleton("all"))
    def constant(ctx):
        return None

    @define_workflow("keyed", registry=registry, singleton=Singleton(key=lambda i: i["k"]))
    def keyed(ctx):
        return None

    @define_workflow("quiet", registry=registry, debounce=Debounce(period=60, max_wait=120))
    def quiet(ctx):
        return None

    client.sync_registry(registry)
    by_name = create_client(redis_url, prefix=prefix, registry=Registry())
    try:
        first = by_name.run("constant", 1, delay=60)
        assert by_name.run("constant", 2).id == first.id == constant.run(3, client=client).id
        with pytest.raises(RedflowError, match="workflow 'keyed' has a singleton key function: enqueue it from a client whose registry"):
            by_name.run("keyed", {"k": "a"})
        collapsed = by_name.run("quiet", 1)
        assert quiet.run(2, client=client).id == collapsed.id
        assert client.get_run(collapsed.id).debounce == "60000:120000"
    finally:
        by_name.close()
    assert_one_run_keys(r, client.keys)
