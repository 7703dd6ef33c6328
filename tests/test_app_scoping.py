"""App names scope queues as the asyncio ``redflow`` package (0.0.8 and later)
scopes them (``shop`` + ``default`` -> ``shop:default``, core/app_scope.py's
scope_queue): ``create_client(app=)``, ``start_worker(app=)``, ``worker
--app-name`` and ``REDFLOW_APP``.

Invariants: every run a client or worker of app A starts (``run``,
``run_many``, children, event subscribers, cron fires, schedules) waits in a queue of
app A, and a worker of app A polls only app A's queues, so two workers of
different apps on one Redis never run each other's runs; the synced metadata
and trigger definitions carry the app and the scoped queue, as its
``sync_registry`` writes them.
"""

from __future__ import annotations

import gevent
import pytest
from helpers import WorkerProcess, wait_until

from redflow import Registry, create_client, define_workflow
from redflow.core.errors import RedflowError
from redflow.core.models import CronDef, EventDef


def test_a_client_and_a_worker_of_one_app_meet_in_its_scoped_queue(start, registry, redis_url, prefix, r):
    @define_workflow("scoped", registry=registry)
    def scoped(ctx):
        return ctx.run.queue

    with create_client(redis_url, prefix=prefix, registry=registry, app="shop") as shop:
        handle = scoped.run(None, client=shop)
        assert r.hget(shop.keys.run(handle.id), "queue") == "shop:default" and r.llen(shop.keys.queue_ready("shop:default")) == 1
        worker = start(app="shop")
        assert worker.queues == ["shop:default"]
        assert handle.result(10) == "shop:default"
        meta = r.hgetall(shop.keys.workflow("scoped"))
        assert (meta["app"], meta["queue"]) == ("shop", "shop:default")
        assert shop.resolve_workflow("scoped").queue == "shop:default"


def test_two_workers_of_different_apps_side_by_side_run_only_their_own_apps_runs(start, redis_url, prefix, r):
    """One registry (one workflow name) served by two apps: the metadata is the
    last sync's, but runs started from a registry are scoped by their client's app."""
    registry = Registry()

    @define_workflow("shared-name", registry=registry)
    def shared(ctx):
        r.rpush(f"{prefix}:ran", ctx.run.queue)
        return ctx.run.queue

    clients = {app: create_client(redis_url, prefix=prefix, registry=registry, app=app) for app in ("north", "south")}
    workers = {app: start(registry, app=app, concurrency=2) for app in ("north", "south")}
    handles = {app: [shared.run(i, client=c) for i in range(10)] for app, c in clients.items()}
    for app, started in handles.items():
        assert {handle.result(10) for handle in started} == {f"{app}:default"}
    assert sorted(r.lrange(f"{prefix}:ran", 0, -1)) == ["north:default"] * 10 + ["south:default"] * 10
    assert {app: w.stats["succeeded"] for app, w in workers.items()} == {"north": 10, "south": 10}
    for c in clients.values():
        c.close()


def test_a_worker_without_the_app_does_not_see_the_apps_runs(start, registry, redis_url, prefix, r):
    @define_workflow("unseen", registry=registry)
    def unseen(ctx):
        return "ran"

    start()  # no app: it polls "default"
    with create_client(redis_url, prefix=prefix, registry=registry, app="shop") as shop:
        handle = unseen.run(None, client=shop)
        gevent.sleep(0.5)
        assert handle.status() == "queued"
        start(app="shop")
        assert handle.result(10) == "ran"


def test_every_enqueue_path_of_an_app_lands_in_its_scoped_queues(start, registry, redis_url, prefix, r):
    @define_workflow("child", queue="kids", registry=registry)
    def child(ctx):
        return ctx.run.queue

    @define_workflow("parent", registry=registry)
    def parent(ctx):
        one = ctx.step.run_workflow("one", child, None)
        many = ctx.step.run_workflows("many", child, [1, 2])
        return [ctx.run.queue, one, *many]

    @define_workflow("on-paid", events=["paid"], registry=registry)
    def on_paid(ctx):
        r.rpush(f"{prefix}:paid", ctx.run.queue)

    @define_workflow("tick", queue="cronq", cron=["* * * * * *"], registry=registry)
    def tick(ctx):
        r.rpush(f"{prefix}:ticks", ctx.run.queue)

    start(app="shop", concurrency=4)
    with create_client(redis_url, prefix=prefix, registry=registry, app="shop") as shop:
        assert parent.run(None, client=shop).result(15) == ["shop:default", "shop:kids", "shop:kids", "shop:kids"]
        assert {h.result(10) for h in shop.run_many(child, [1, 2])} == {"shop:kids"}
        assert shop.run("child", None, queue="other").id and r.llen(shop.keys.queue_ready("shop:other")) == 1
        shop.schedules.create("nightly-kids", workflow="child", cron="0 2 * * *")
        assert shop.schedules.trigger("nightly-kids").result(10) == "shop:kids"
        shop.emit_event("paid", {"order": 1})
        wait_until(lambda: r.lrange(f"{prefix}:paid", 0, -1) == ["shop:default"], timeout=10)
        wait_until(lambda: r.llen(f"{prefix}:ticks") >= 1, timeout=10)
        assert set(r.lrange(f"{prefix}:ticks", 0, -1)) == {"shop:cronq"}
        keys = shop.keys
        (cron_raw,) = r.hvals(keys.cron_def())
        (event_raw,) = r.hvals(keys.event_def())
        assert CronDef.from_json(cron_raw).queue == "shop:cronq" and EventDef.from_json(event_raw).queue == "shop:default"


def test_an_enqueue_by_name_follows_the_app_the_metadata_names(start, registry, redis_url, prefix, r):
    """As the asyncio package's client: the app in the synced metadata wins over the client's."""

    @define_workflow("by-name", registry=registry)
    def by_name(ctx):
        return ctx.run.queue

    start(app="shop")
    for app in (None, "other"):
        with create_client(redis_url, prefix=prefix, app=app) as stranger:  # knows the workflow by its metadata only
            assert stranger.run("by-name", None).result(10) == "shop:default"


def test_a_worker_synced_without_an_app_drops_the_app_a_former_sync_wrote(registry, redis_url, prefix, r):
    @define_workflow("moved", registry=registry)
    def moved(ctx):
        return None

    with create_client(redis_url, prefix=prefix, app="shop") as shop:
        shop.sync_registry(registry)
    with create_client(redis_url, prefix=prefix) as plain:
        plain.sync_registry(registry)
        meta = r.hgetall(plain.keys.workflow("moved"))
        assert "app" not in meta and meta["queue"] == "default"
        assert plain.resolve_workflow("moved").queue == "default"


def test_the_app_comes_from_redflow_app_when_not_given_and_a_blank_one_is_refused(monkeypatch, redis_url, prefix):
    monkeypatch.setenv("REDFLOW_APP", " shop ")
    with create_client(redis_url, prefix=prefix) as from_env:
        assert from_env.store.interop.app == "shop"
    with create_client(redis_url, prefix=prefix, app="north") as given:
        assert given.store.interop.app == "north"
    for bad in ("", "  ", 7):
        with pytest.raises(RedflowError, match="app must be a non-empty name"):
            create_client(redis_url, prefix=prefix, app=bad)


@pytest.mark.parametrize("how", ["--app-name", "REDFLOW_APP"])
def test_the_worker_command_takes_the_app_name_from_its_option_or_the_environment(how, redis_url, prefix, cli_client, monkeypatch, r):
    extra = ("--app-name", "shop") if how == "--app-name" else ()
    if how == "REDFLOW_APP":
        monkeypatch.setenv("REDFLOW_APP", "shop")  # the worker process inherits it
    with WorkerProcess(redis_url, prefix, *extra) as worker:
        wait_until(lambda: r.hget(cli_client.keys.workflow("count"), "app") == "shop", timeout=30, message=worker.output())
        assert r.hget(cli_client.keys.workflow("count"), "queue") == "shop:default"
        with create_client(redis_url, prefix=prefix) as stranger:
            handle = stranger.run("count", {"key": f"{prefix}:seen", "n": 1})
        assert handle.result(20) == 2 and r.hget(cli_client.keys.run(handle.id), "queue") == "shop:default"
        assert worker.stop() == 0
