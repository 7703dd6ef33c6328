"""The per-run terminal stream ``P:run:<id>:terminal`` that the asyncio
``redflow`` package's ``handle.result()`` (0.1.2 and later) blocks on.

Invariant: a run with the ``parentRunId`` field (the asyncio package's clients
always write it; ours with ``compat=`` or ``app=``, and on child runs) gets one
entry ``{status, finishedAt}`` there in the same script that makes it
terminal, whichever path ends it (the worker's settle, a cancel of a queued,
scheduled or unheld run, a cancel the worker acts on); a run without the field
gets none (the hot path stays as it was); the stream lives a minute (its
waiters read the run before they block), a manual retry clears it, and
retention and purge delete it with the run.
"""

from __future__ import annotations

import gevent
import pytest
from helpers import wait_until

from redflow import create_client, define_workflow


def entries(r, key: str) -> list[dict[str, str]]:
    return [fields for _, fields in r.xrange(key)]


@pytest.fixture
def compat_client(redis_url, prefix, registry):
    c = create_client(redis_url, prefix=prefix, registry=registry, compat="redflow-0.1")
    yield c
    c.close()


def test_a_run_with_parent_run_id_gets_its_end_in_its_terminal_stream_and_others_get_none(start, client, compat_client, registry, r):
    @define_workflow("ends", registry=registry)
    def ends(ctx):
        if ctx.input == "fail":
            raise ValueError("no")
        return ctx.input

    start()
    marked_ok, marked_failed = ends.run("ok", client=compat_client), ends.run("fail", client=compat_client)
    plain = ends.run("ok", client=client)
    assert r.hget(compat_client.keys.run(marked_ok.id), "parentRunId") == "" and r.hexists(client.keys.run(plain.id), "parentRunId") == 0
    for handle in (marked_ok, marked_failed, plain):
        wait_until(lambda h=handle: h.status() in ("succeeded", "failed"), timeout=15)
    keys = client.keys
    for handle, status in ((marked_ok, "succeeded"), (marked_failed, "failed")):
        assert entries(r, keys.run_terminal(handle.id)) == [{"status": status, "finishedAt": r.hget(keys.run(handle.id), "finishedAt")}]
        assert 0 < r.pttl(keys.run_terminal(handle.id)) <= 60_000
    assert r.exists(keys.run_terminal(plain.id)) == 0


def test_a_client_with_an_app_name_marks_its_runs_too(redis_url, prefix, registry, r):
    @define_workflow("marked-by-app", registry=registry)
    def wf(ctx):
        return None

    with create_client(redis_url, prefix=prefix, registry=registry, app="shop") as shop:
        handle = wf.run(None, client=shop)
        assert r.hget(shop.keys.run(handle.id), "parentRunId") == ""


def test_canceling_a_queued_or_scheduled_run_adds_the_entry(compat_client, registry, r):
    @define_workflow("cancel-me", registry=registry)
    def wf(ctx):
        return None

    queued, scheduled = wf.run(None, client=compat_client), wf.run(None, client=compat_client, delay=60)
    for handle in (queued, scheduled):
        assert handle.cancel("stop")
        key = compat_client.keys.run_terminal(handle.id)
        assert entries(r, key) == [{"status": "canceled", "finishedAt": r.hget(compat_client.keys.run(handle.id), "finishedAt")}]


def test_a_running_run_canceled_through_its_worker_adds_the_entry(start, compat_client, registry, r):
    @define_workflow("long", registry=registry)
    def long(ctx):
        ctx.step.run("wait", lambda signal: signal.wait(30))

    start()
    handle = long.run(None, client=compat_client)
    wait_until(lambda: handle.status() == "running")
    assert handle.cancel("enough")
    wait_until(lambda: handle.status() == "canceled", timeout=10)
    assert [e["status"] for e in entries(r, compat_client.keys.run_terminal(handle.id))] == ["canceled"]


def test_a_retry_clears_the_stream_and_the_next_end_writes_it_again(start, compat_client, registry, r):
    @define_workflow("flaky", max_attempts=1, registry=registry)
    def flaky(ctx):
        if r.incr(f"{compat_client.prefix}:flaky") == 1:
            raise ValueError("first time")
        return "second time"

    start()
    handle = flaky.run(None, client=compat_client)
    wait_until(lambda: handle.status() == "failed", timeout=10)
    key = compat_client.keys.run_terminal(handle.id)
    assert [e["status"] for e in entries(r, key)] == ["failed"]
    assert handle.retry()
    assert handle.result(10) == "second time"
    assert [e["status"] for e in entries(r, key)] == ["succeeded"]


def test_purge_and_retention_delete_the_stream_with_the_run(start, compat_client, registry, r):
    @define_workflow("brief", retention=1, registry=registry)
    def brief(ctx):
        return None

    @define_workflow("kept", registry=registry)
    def kept(ctx):
        return None

    start(retention_interval_s=0.05)
    purged, expired = kept.run(None, client=compat_client), brief.run(None, client=compat_client)
    purged.result(10), expired.result(10)
    keys = compat_client.keys
    assert r.exists(keys.run_terminal(purged.id)) == 1
    wait_until(lambda: r.exists(keys.run(expired.id)) == 0, timeout=10)
    gevent.sleep(0)
    assert r.exists(keys.run_terminal(expired.id)) == 0
    assert compat_client.purge(older_than=0, workflow="kept") == 1
    assert r.exists(keys.run_terminal(purged.id)) == 0
