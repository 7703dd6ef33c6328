"""Retention: finished runs leave Redis whole (hash, steps, every index entry)
once their workflow's retention has passed; live runs never do."""

from __future__ import annotations

from datetime import timedelta

import gevent
import pytest
from doc_pages import python_blocks
from helpers import wait_until
from test_docs_examples import run_script

from redflow import Debounce, Registry, Retention, Singleton, define_workflow
from redflow.core.errors import RedflowError, RunNotFoundError
from redflow.core.models import WorkflowField, retention_from_json, retention_json
from redflow.core.retention import DEFAULT_RETENTION, KEEP_FOREVER, retention_from_days, retention_of
from redflow.engine.retention import RetentionCleaner
from redflow.store.connection import resolve_default_retention

FAST = {"retention_interval_s": 0.1}


def run_keys(client, run_id, workflow):
    """Every key and index entry a finished run may have: (key, member or None)."""
    k = client.keys
    own = [k.run(run_id), k.run_steps(run_id), k.run_lease(run_id), k.run_done(run_id), k.run_children(run_id)]
    indexes = [k.runs_created(), k.workflow_runs(workflow), *(k.runs_status(s) for s in ("succeeded", "failed", "canceled"))]
    return [(key, None) for key in own] + [(key, run_id) for key in indexes]


def finished(workflow, client, count, input=None):
    """``count`` runs of ``workflow``, one after the other, each waited for
    until it ended (at once: a short retention may delete it soon after)."""
    handles = []
    for _ in range(count):
        handles.append(workflow.run(input, client=client))
        handles[-1].result(10)
    return handles


def traces(client, run_id, workflow):
    """What is left of a run in Redis: its keys and the indexes naming it."""
    r = client.redis
    left = []
    for key, member in run_keys(client, run_id, workflow):
        if (member is None and r.exists(key)) or (member is not None and r.zscore(key, member) is not None):
            left.append(key if member is None else f"{key} -> {member}")
    return left


# -- the value type --------------------------------------------------------------


def test_retention_takes_seconds_timedeltas_or_none_and_refuses_anything_else_clearly():
    assert retention_of(60) == Retention(succeeded=60, failed=60, canceled=60)
    assert retention_of(timedelta(hours=1)).failed == 3600.0
    assert retention_of(None) == KEEP_FOREVER and KEEP_FOREVER.keeps_forever
    assert Retention(succeeded=timedelta(seconds=1.5)).keep_ms("succeeded") == 1500
    assert DEFAULT_RETENTION.keep_ms("succeeded") == 86_400_000 and DEFAULT_RETENTION.keep_ms("failed") == 7 * 86_400_000
    for bad, words in [(0, "> 0"), (-1, "> 0"), (float("nan"), "finite"), (float("inf"), "finite"), ("1d", "not str")]:
        with pytest.raises(RedflowError, match=words):
            retention_of(bad)
    for cap in (0, -3, 2.5, True, "10"):
        with pytest.raises(RedflowError, match="max_finished"):
            Retention(max_finished=cap)
    with pytest.raises(RedflowError, match="workflow 'w': retention"):
        define_workflow("w", retention="forever", registry=Registry())


def test_the_environment_default_is_days_or_forever_and_a_bad_value_is_named(monkeypatch):
    assert retention_from_days("2") == retention_of(2 * 86400)
    assert retention_from_days("forever") == KEEP_FOREVER == retention_from_days("0")
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(RedflowError, match="REDFLOW_RUN_RETENTION_DAYS"):
            retention_from_days(bad)
    monkeypatch.setenv("REDFLOW_RUN_RETENTION_DAYS", "0.5")
    assert resolve_default_retention() == retention_of(43200)
    assert resolve_default_retention(KEEP_FOREVER) == KEEP_FOREVER  # an explicit one wins
    monkeypatch.delenv("REDFLOW_RUN_RETENTION_DAYS")
    assert resolve_default_retention() == DEFAULT_RETENTION


def test_the_stored_retention_round_trips_and_an_unreadable_one_means_the_default():
    for retention in (DEFAULT_RETENTION, KEEP_FOREVER, Retention(succeeded=1.5, failed=None, canceled=60, max_finished=7)):
        assert retention_from_json(retention_json(retention)) == retention
    for raw in (None, "", "not json", "[1]", '{"succeededMs": "soon"}', '{"maxFinished": 0}'):
        assert retention_from_json(raw) is None


def test_sync_stores_each_workflows_retention_in_its_metadata(client, registry, r):
    @define_workflow("short", retention=2, registry=registry)
    def short(ctx):
        return None

    @define_workflow("forever", retention=None, registry=registry)
    def forever(ctx):
        return None

    client.sync_registry(registry)
    stored = {name: retention_from_json(r.hget(client.keys.workflow(name), WorkflowField.RETENTION_JSON)) for name in ("short", "forever")}
    assert stored == {"short": retention_of(2), "forever": KEEP_FOREVER}


# -- the cleaner ---------------------------------------------------------------------


def test_a_finished_run_leaves_whole_after_its_retention_and_one_kept_forever_stays(start, client, registry):
    @define_workflow("brief", retention=1, registry=registry)
    def brief(ctx):
        return ctx.step.run("one", lambda: 1) + ctx.step.run("two", lambda: 2)

    @define_workflow("kept", retention=None, registry=registry)
    def kept(ctx):
        return ctx.step.run("one", lambda: 1)

    start(**FAST)
    gone, stays = brief.run(None, client=client), kept.run(None, client=client)
    assert gone.result(10) == 3 and stays.result(10) == 1  # waited for: both have a wake-up list too
    assert client.get_steps(gone.id) and traces(client, gone.id, "brief")
    wait_until(lambda: traces(client, gone.id, "brief") == [], timeout=10)
    assert client.get_run(gone.id) is None and client.get_steps(gone.id) == []
    assert client.get_run(stays.id).status == "succeeded" and [s.name for s in client.get_steps(stays.id)] == ["one"]
    assert client.list_runs(workflow="brief") == []


def test_failed_and_canceled_runs_follow_their_own_retention_and_live_runs_are_never_touched(start, client, registry):
    @define_workflow("mixed", retention=Retention(succeeded=None, failed=1, canceled=1), max_attempts=1, registry=registry)
    def mixed(ctx):
        if ctx.input == "fail":
            raise RuntimeError("no")
        return ctx.input

    @define_workflow("parked", queue="parking", retention=1, registry=registry)
    def parked(ctx):
        return None

    start(queues=["default"], **FAST)
    ok, bad = mixed.run("ok", client=client), mixed.run("fail", client=client)  # bad is deleted once failed
    assert ok.result(10) == "ok"
    canceled_queued = parked.run(None, client=client)  # queued: no worker serves "parking"
    canceled_scheduled = mixed.run("ok", client=client, delay=3600)
    live_queued, live_scheduled = parked.run(None, client=client), mixed.run("ok", client=client, delay=3600)
    assert client.cancel(canceled_queued.id) and client.cancel(canceled_scheduled.id)
    for run_id, workflow in [(bad.id, "mixed"), (canceled_queued.id, "parked"), (canceled_scheduled.id, "mixed")]:
        wait_until(lambda run_id=run_id, workflow=workflow: traces(client, run_id, workflow) == [], timeout=10)
    gevent.sleep(1.5)  # passes enough to have deleted them, were they due
    assert client.get_run(ok.id).status == "succeeded"
    assert client.get_run(live_queued.id).status == "queued" and client.get_run(live_scheduled.id).status == "scheduled"


def test_a_longer_retention_in_the_same_index_does_not_hold_back_a_shorter_one(start, client, registry):
    @define_workflow("week", retention=7 * 86400, registry=registry)
    def week(ctx):
        return None

    @define_workflow("second", retention=1, registry=registry)
    def second(ctx):
        return None

    start(**FAST)
    old = finished(week, client, 30)  # ended first: ahead in the succeeded index
    finished(second, client, 30)
    wait_until(lambda: client.redis.zcard(client.keys.workflow_runs("second")) == 0, timeout=10)
    assert all(client.get_run(h.id).status == "succeeded" for h in old)


def test_a_workflow_that_joins_a_retention_has_its_older_runs_found_again(start, client, registry, prefix, redis_url):
    """The lane of a retention value starts from the beginning once when a
    workflow joins it, so runs a walk stepped over (kept longer then) are due now."""

    @define_workflow("changing", retention=None, registry=registry)
    def changing(ctx):
        return None

    @define_workflow("other", retention=1, registry=registry)
    def other(ctx):
        return None

    worker = start(**FAST)
    finished(changing, client, 5)
    finished(other, client, 1)
    wait_until(lambda: client.redis.zcard(client.keys.workflow_runs("other")) == 0, timeout=10)  # the 1 s lane walked past them
    worker.stop()
    shorter = Registry()
    define_workflow("changing", retention=1, registry=shorter)(lambda ctx: None)
    start(shorter, **FAST)
    wait_until(lambda: client.redis.zcard(client.keys.workflow_runs("changing")) == 0, timeout=10)


def test_max_finished_keeps_the_newest_runs_of_the_workflow(start, client, registry):
    @define_workflow("capped", retention=Retention(max_finished=10), registry=registry)
    def capped(ctx):
        return ctx.input

    for i in range(40):
        capped.run(i, client=client)
    # Oldest first as the index orders them: by createdAt, runs created in one ms by id.
    by_age = client.redis.zrange(client.keys.workflow_runs("capped"), 0, -1)
    start(concurrency=1, **FAST)
    wait_until(lambda: client.count_runs("queued") + client.count_runs("running") == 0, timeout=20)  # runs may go before a wait
    wait_until(lambda: client.redis.zcard(client.keys.workflow_runs("capped")) == 10, timeout=10)
    gevent.sleep(0.5)
    assert sorted(run.id for run in client.list_runs(workflow="capped", limit=100)) == sorted(by_age[30:])
    assert all(traces(client, run_id, "capped") == [] for run_id in by_age[:30])


def test_max_finished_holds_however_many_live_runs_are_the_oldest_of_the_index(start, client, registry, r):
    """600 runs waiting an hour head the index, ahead of a page (500): the cap's
    walk steps past them (a cursor) and reaches the finished runs behind."""

    @define_workflow("crowded", retention=Retention(succeeded=None, max_finished=100), registry=registry)
    def crowded(ctx):
        return ctx.input

    live = {crowded.run(i, client=client, delay=3600).id for i in range(600)}
    done = client.run_many(crowded, range(150))
    start(concurrency=20, clean_retention=False)
    wait_until(lambda: client.count_runs("succeeded") == 150, timeout=30)
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
    for _ in range(20):
        cleaner.step()
        if r.zcard(client.keys.workflow_runs("crowded")) == 600:
            break
    assert set(r.zrange(client.keys.workflow_runs("crowded"), 0, -1)) == live  # live runs count toward the cap and stay
    assert cleaner.purged == 150 and all(traces(client, h.id, "crowded") == [] for h in done)
    cleaner.stop()


def _synthetic_runs(client, workflow, statuses, created_ms):
    """Run hashes and index entries as a worker leaves them, all created in one ms
    (as ``run_workflows`` creates its children): ids in index order."""
    k, pipe = client.keys, client.redis.pipeline(transaction=False)
    ids = [f"run_{workflow}-{i:04d}" for i in range(len(statuses))]
    for run_id, status in zip(ids, statuses):
        fields = {"workflow": workflow, "queue": "default", "status": status, "createdAt": created_ms}
        if status == "succeeded":
            fields["finishedAt"] = created_ms + 1
        pipe.hset(k.run(run_id), mapping=fields).zadd(k.runs_status(status), {run_id: fields.get("finishedAt", created_ms)})
        pipe.zadd(k.runs_created(), {run_id: created_ms}).zadd(k.workflow_runs(workflow), {run_id: created_ms})
    pipe.execute()
    return ids


def test_the_cap_walk_pages_through_runs_created_in_one_ms_and_comes_round_again(client, registry, r):
    """Pages of 50 over 130 runs of one createdAt (ties ordered by id), the 70
    oldest live: every finished run is reached; live runs that end after the
    walk passed them go when it comes round again."""

    @define_workflow("tied", retention=Retention(succeeded=None, max_finished=10), registry=registry)
    def tied(ctx):
        return None

    client.sync_registry(registry)
    ids = _synthetic_runs(client, "tied", ["scheduled"] * 70 + ["succeeded"] * 60, client.now_ms() - 5000)
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION, page=50)
    index = client.keys.workflow_runs("tied")
    for _ in range(20):
        cleaner.step()
        if r.zcard(index) == 70:
            break
    assert r.zrange(index, 0, -1) == ids[:70] and cleaner.purged == 60
    k, now = client.keys, client.now_ms()
    for run_id in ids[:30]:  # 30 of the live runs end now, behind the walk
        r.hset(k.run(run_id), mapping={"status": "succeeded", "finishedAt": now})
        r.zrem(k.runs_status("scheduled"), run_id)
        r.zadd(k.runs_status("succeeded"), {run_id: now})
    for _ in range(20):
        cleaner.step()
        if r.zcard(index) == 40:
            break
    assert r.zrange(index, 0, -1) == ids[30:70] and cleaner.purged == 90
    cleaner.stop()


def test_runs_of_workflows_that_stored_no_retention_get_the_workers_default(start, client, registry, r):
    @define_workflow("foreign", registry=registry)
    def foreign(ctx):
        return None

    client.sync_registry(registry)
    r.hdel(client.keys.workflow("foreign"), WorkflowField.RETENTION_JSON)  # as the TypeScript client syncs it
    start(Registry([foreign]), default_retention=retention_of(1), cron=False, **FAST)
    r.hdel(client.keys.workflow("foreign"), WorkflowField.RETENTION_JSON)  # the worker's own sync wrote one
    handle = client.run("foreign")
    handle.result(10)
    wait_until(lambda: traces(client, handle.id, "foreign") == [], timeout=15)


def test_2000_runs_with_a_one_second_retention_leave_no_key_and_no_index_entry(start, client, registry, r, prefix):
    @define_workflow("burst", retention=1, registry=registry)
    def burst(ctx):
        return ctx.step.run("s", lambda: ctx.input)

    handles = client.run_many(burst, range(2000))
    start(concurrency=20, **FAST)
    wait_until(lambda: client.count_runs("succeeded") + client.count_runs("queued") + client.count_runs("running") == 0, timeout=60)
    ids = {h.id for h in handles}
    left = [key for key in r.scan_iter(match=f"{prefix}:*", count=1000) if any(run_id in key for run_id in ids)]
    assert left == []
    for key in r.scan_iter(match=f"{prefix}:*", count=1000):
        kind = r.type(key)
        if kind == "zset":
            assert not ids & set(r.zrange(key, 0, -1)), key
        elif kind == "list":
            assert not ids & set(r.lrange(key, 0, -1)), key
        elif kind == "hash":
            assert not ids & set(r.hkeys(key)), key


def test_one_worker_cleans_at_a_time_and_another_takes_over_when_it_stops(start, client, registry, r):
    @define_workflow("handover", retention=1, registry=registry)
    def handover(ctx):
        return None

    first, second = start(**FAST), start(**FAST)
    wait_until(lambda: first.retention.lock.held or second.retention.lock.held)
    assert not (first.retention.lock.held and second.retention.lock.held)
    leader, other = (first, second) if first.retention.lock.held else (second, first)
    leader.stop()
    handle = handover.run(None, client=client)
    handle.result(10)
    wait_until(lambda: traces(client, handle.id, "handover") == [], timeout=10)
    assert other.retention.lock.held and other.retention.purged >= 1


def test_a_pass_reads_at_most_a_page_and_comes_back_at_once_when_more_is_due(client, registry):
    @define_workflow("paged", retention=1, registry=registry)
    def paged(ctx):
        return None

    client.sync_registry(registry)
    now = client.now_ms()
    k, pipe = client.keys, client.redis.pipeline(transaction=False)
    for i in range(130):  # finished two seconds ago, as a worker leaves them
        run_id = f"run_paged-{i:03d}"
        fields = {"workflow": "paged", "queue": "default", "status": "succeeded", "createdAt": now - 3000, "finishedAt": now - 2000}
        pipe.hset(k.run(run_id), mapping=fields).zadd(k.runs_status("succeeded"), {run_id: now - 2000})
        pipe.zadd(k.runs_created(), {run_id: now - 3000}).zadd(k.workflow_runs("paged"), {run_id: now - 3000})
    pipe.execute()
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION, page=50)
    passes = []
    while client.redis.zcard(k.runs_status("succeeded")):
        passes.append(cleaner.step())
        assert len(passes) < 10
    assert passes[:-1] == [0.0] * (len(passes) - 1) and cleaner.purged == 130
    cleaner.stop()


def test_waiting_on_a_run_that_a_retention_deleted_says_it_is_gone(start, client, registry):
    @define_workflow("vanishing", retention=1, registry=registry)
    def vanishing(ctx):
        return None

    start(**FAST)
    handle = vanishing.run(None, client=client)
    handle.result(10)
    wait_until(lambda: client.get_run(handle.id) is None, timeout=10)
    with pytest.raises(RunNotFoundError):
        handle.status()
    with pytest.raises(RunNotFoundError):
        handle.result(1)


def test_with_the_default_retention_nothing_that_just_ended_is_deleted(start, client, registry):
    """Default retention (a day): a pass reads the lanes and finds nothing."""

    @define_workflow("daily", registry=registry)
    def daily(ctx):
        return None

    worker = start(**FAST)
    handles = finished(daily, client, 20)
    gevent.sleep(0.5)
    assert worker.retention.purged == 0 and all(client.get_run(h.id) for h in handles)


def test_a_stopped_worker_gives_the_lock_back(start, client, registry, r):
    worker = start(**FAST)
    wait_until(lambda: worker.retention.lock.held)
    worker.stop()
    assert r.get(client.keys.lock_retention()) is None


def test_the_retention_guides_example_runs(redis_url, prefix):
    (block,) = [b for b in python_blocks() if "retention=Retention(succeeded=3600" in b.code]
    result = run_script(block.code, redis_url, prefix)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "0"]


def test_tagged_failed_and_canceled_runs_leave_no_entry_in_the_search_indexes(start, client, registry, r, prefix):
    @define_workflow("tagged", retention=1, max_attempts=1, registry=registry)
    def tagged(ctx):
        if ctx.input == "fail":
            raise ValueError("fails on purpose")
        return ctx.input

    handles = [client.run("tagged", value, tags={"customer": "42", "plan": "pro"}) for value in ("ok", "fail", "ok")]
    canceled = client.run("tagged", "late", tags={"customer": "42"}, delay=60)
    assert client.cancel(canceled.id)
    k = client.keys
    assert set(r.zrange(k.tag("customer", "42"), 0, -1)) == {h.id for h in handles} | {canceled.id}
    assert r.zrange(k.workflow_tag("tagged", "plan", "pro"), 0, -1) and r.zrange(k.workflow_status("canceled", "tagged"), 0, -1) == [
        canceled.id
    ]
    assert r.zrange(k.tag_status("canceled", "customer", "42"), 0, -1) == [canceled.id]
    start(**FAST)
    ids = {h.id for h in handles} | {canceled.id}
    wait_until(lambda: all(client.get_run(run_id) is None for run_id in ids), timeout=20)
    for key in r.scan_iter(match=f"{prefix}:*", count=1000):
        if r.type(key) == "zset":
            assert not ids & set(r.zrange(key, 0, -1)), key


def test_retention_deletes_a_singleton_key_or_debounce_window_a_run_it_deletes_still_names(start, client, registry, r):
    """Our scripts let go of a key when the run ends; one another client's worker ended without
    doing so (here: ended by hand) is deleted with the run by retention (purge_run.lua)."""

    @define_workflow("one-at-a-time", retention=1, registry=registry, singleton=Singleton("all"))
    def one_at_a_time(ctx):
        return None

    @define_workflow("collapsing", retention=1, registry=registry, debounce=Debounce(period=60))
    def collapsing(ctx):
        return None

    held, windowed = one_at_a_time.run(None, client=client, delay=60), collapsing.run(None, client=client)
    names = [client.keys.singleton("one-at-a-time", "all"), client.keys.debounce("collapsing", "")]
    for handle in (held, windowed):  # ended elsewhere: the fields and indexes a finished run has, the key left
        r.hset(client.keys.run(handle.id), mapping={"status": "succeeded", "finishedAt": client.now_ms() - 5000})
        r.zrem(client.keys.runs_status("scheduled"), handle.id)
        r.zrem(client.keys.queue_scheduled("default"), handle.id)
        r.zadd(client.keys.runs_status("succeeded"), {handle.id: client.now_ms() - 5000})
    assert [r.get(name) for name in names] == [held.id, windowed.id]
    start(**FAST)
    wait_until(lambda: client.get_run(held.id) is None and client.get_run(windowed.id) is None, timeout=10)
    assert [r.get(name) for name in names] == [None, None]
