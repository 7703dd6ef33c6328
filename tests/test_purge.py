"""client.purge and `redflow-gevent runs purge`: finished runs by age, status
and workflow, in bounded batches, never a live run; the purge script refuses
a run that was retried since it was read."""

from __future__ import annotations

from datetime import timedelta

import gevent
import orjson
import pytest
from gevent.event import Event
from helpers import wait_until

from redflow import define_workflow
from redflow.core.errors import RedflowError
from redflow.ops.cli import build_parser
from redflow.store.purge import PurgeQuery, purge_finished

NO_CLEANER = {"clean_retention": False}


@pytest.fixture
def history(start, client, registry):
    """Two succeeded runs of "a", one failed of "b", one canceled of "a"; and
    live ones: queued, scheduled, running (held until the test ends)."""
    release = Event()

    @define_workflow("a", registry=registry, max_attempts=1)
    def a(ctx):
        if ctx.input == "hold":
            release.wait(30)
        return ctx.input

    @define_workflow("b", registry=registry, max_attempts=1)
    def b(ctx):
        raise RuntimeError("b fails")

    @define_workflow("parked", queue="parking", registry=registry)
    def parked(ctx):
        return None

    start(queues=["default"], concurrency=4, **NO_CLEANER)
    done = {"a1": a.run(1, client=client), "a2": a.run(2, client=client), "b1": b.run(None, client=client)}
    done["a1"].result(10), done["a2"].result(10)
    with pytest.raises(RedflowError):
        done["b1"].result(10)
    done["a-canceled"] = a.run(None, client=client, delay=3600)
    assert client.cancel(done["a-canceled"].id)
    live = {"queued": parked.run(None, client=client), "scheduled": a.run(3, client=client, delay=3600)}
    live["running"] = a.run("hold", client=client)
    wait_until(lambda: live["running"].status() == "running")
    yield {name: h.id for name, h in done.items()}, {name: h.id for name, h in live.items()}
    release.set()


def present(client, ids):
    return {name for name, run_id in ids.items() if client.get_run(run_id) is not None}


def test_purge_by_age_status_and_workflow_never_touches_a_live_run(client, history):
    done, live = history
    assert client.purge(older_than=3600) == 0  # nothing ended an hour ago
    assert client.purge(older_than=0, status="failed", dry_run=True) == 1 and present(client, done) == set(done)
    assert client.purge(older_than=timedelta(0), status="failed") == 1
    assert present(client, done) == {"a1", "a2", "a-canceled"}
    assert client.purge(older_than=0, workflow="a", status="canceled") == 1
    assert client.purge(older_than=0, workflow="a") == 2
    assert present(client, done) == set()
    assert present(client, live) == set(live)
    assert [client.get_run(run_id).status for run_id in live.values()] == ["queued", "scheduled", "running"]
    assert client.list_runs(limit=100) and all(run.id in live.values() for run in client.list_runs(limit=100))


def test_purge_by_age_keeps_runs_that_ended_more_recently(start, client, registry):
    @define_workflow("aging", registry=registry)
    def aging(ctx):
        return None

    start(**NO_CLEANER)
    old = [aging.run(None, client=client) for _ in range(3)]
    for h in old:
        h.result(10)
    gevent.sleep(1.2)
    new = aging.run(None, client=client)
    new.result(10)
    assert client.purge(older_than=1.0) == 3
    assert client.get_run(new.id) is not None and all(client.get_run(h.id) is None for h in old)


def test_purge_walks_a_large_index_in_pages(start, client, registry):
    @define_workflow("many", registry=registry)
    def many(ctx):
        return None

    handles = client.run_many(many, range(120))
    start(concurrency=8, **NO_CLEANER)
    wait_until(lambda: client.count_runs("succeeded") == 120, timeout=30)
    keep = client.run("many", delay=3600)  # live, and in the workflow's index among the finished ones
    query = PurgeQuery(client.now_ms(), ("succeeded", "failed", "canceled"), "many")
    assert purge_finished(client.scripts, client.redis, query, [None], dry_run=True, page=25) == 120
    assert purge_finished(client.scripts, client.redis, query, [None], page=25) == 120
    assert all(client.get_run(h.id) is None for h in handles) and client.get_run(keep.id).status == "scheduled"


def test_bad_purge_arguments_are_clear_errors_and_delete_nothing(client, history):
    done, _ = history
    for kwargs, words in [
        ({"older_than": -1}, ">= 0"),
        ({"older_than": "1h"}, "older_than must be a number"),
        ({"older_than": None}, "older_than is required"),
        ({"older_than": 0, "status": "queued"}, "finished runs"),
        ({"older_than": 0, "workflow": ""}, "workflow"),
    ]:
        with pytest.raises(RedflowError, match=words):
            client.purge(**kwargs)
    assert present(client, done) == set(done)


def test_the_purge_script_refuses_a_live_run_and_one_retried_since_it_was_read(start, client, registry):
    attempts = []

    @define_workflow("flaky", registry=registry, max_attempts=1)
    def flaky(ctx):
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first time")
        return "second time"

    start(**NO_CLEANER)
    handle = flaky.run(None, client=client)
    with pytest.raises(RedflowError):
        handle.result(10)
    seen = client.get_run(handle.id)
    seen_ms = str(round(seen.finished_at * 1000))
    assert client.retry(handle.id)
    outcome = client.scripts.purge_run(run_id=handle.id, queue=None, workflow="flaky", finished_at=seen_ms)
    assert outcome in ("live", "changed")
    assert handle.result(10) == "second time"  # finished again, later
    assert client.scripts.purge_run(run_id=handle.id, queue=None, workflow="flaky", finished_at=seen_ms) == "changed"
    assert client.get_run(handle.id).status == "succeeded"
    assert client.scripts.purge_run(run_id=handle.id, queue=None, workflow="flaky") == "purged"
    assert client.scripts.purge_run(run_id=handle.id, queue=None, workflow="flaky") == "missing"


# -- the command line -------------------------------------------------------------


def test_runs_purge_from_the_command_line_with_dry_run_filters_and_json(cli, client, history):
    done, live = history
    code, out, _ = cli("runs", "purge", "--older-than", "1h")
    assert code == 0 and "deleted 0 finished run(s) that ended over 1h00m ago" in out
    code, out, _ = cli("runs", "purge", "--older-than", "0s", "--status", "failed", "--dry-run")
    assert code == 0 and "would delete 1 failed finished run(s)" in out and present(client, done) == set(done)
    code, out, _ = cli("runs", "purge", "--older-than", "0", "--workflow", "a", "--json")
    assert code == 0 and orjson.loads(out) == {"purged": 3, "dry_run": False}
    assert present(client, done) == {"b1"} and present(client, live) == set(live)


def test_runs_purge_refuses_a_bad_duration_or_status_before_touching_redis(capsys):
    for argv in (["--older-than", "soon"], ["--older-than", "-1h"], ["--older-than", "1h", "--status", "queued"], []):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["runs", "purge", *argv])
        assert exc.value.code == 2
    assert "not a duration: 'soon'" in capsys.readouterr().err
