"""Flow control where operators look: `redflow-gevent queues`, the dashboard
overview and the worker's metrics show, per workflow with limits, runs
running / limit and runs held."""

from __future__ import annotations

import orjson
from gevent.event import Event
from helpers import wait_until
from test_dashboard import dashboard, request  # noqa: F401 - the fixture
from test_metrics import scrape, value

from redflow import Concurrency, RateLimit, define_workflow
from redflow.ops.observe.metrics import MetricsObserver, MetricsServer
from redflow.ops.views.flow import flow_rows


def _busy(start, registry, client, **worker_options):
    """A workflow limited to 2 with 5 runs: 2 running, 3 held; one without limits; one prioritized run waiting."""
    gate = Event()

    @define_workflow("charge", registry=registry, concurrency=[Concurrency(limit=2), Concurrency(limit=1, key=lambda i: i["c"])],
                     rate_limit=RateLimit(limit=100, period=60))  # fmt: skip
    def charge(ctx):
        gate.wait(30)

    @define_workflow("plain", registry=registry)
    def plain(ctx):
        return None

    @define_workflow("elsewhere", registry=registry, queue="later")
    def elsewhere(ctx):
        return None

    worker = start(queues=["default"], concurrency=4, **worker_options)
    for customer in "abcde":
        client.run(charge, {"c": customer})
    client.run(elsewhere, priority=5)
    wait_until(lambda: client.redis.scard(client.keys.limit_waiting("charge")) == 3)
    return worker, gate


def test_queues_shows_running_over_limit_and_held_per_limited_workflow(cli, start, registry, client):  # noqa: F811
    _, gate = _busy(start, registry, client)
    code, out, _ = cli("queues")
    lines = [line.split(maxsplit=4) for line in out.splitlines()]
    assert code == 0 and ["later", "0", "1", "0", "0"] in lines  # the run in the zset; the marker in ready is no run
    assert lines[-2][:4] == ["WORKFLOW", "QUEUE", "RUNNING", "HELD"]
    assert lines[-1] == ["charge", "default", "2/2", "3", "2 at once, 1 per key, 100 per 60s"]
    code, out, _ = cli("queues", "--json")
    (default,) = [q for q in orjson.loads(out) if q["queue"] == "default"]
    assert default["workflows"] == [
        {"workflow": "charge", "queue": "default", "running": 2, "limit": 2, "held": 3, "limits": "2 at once, 1 per key, 100 per 60s"}
    ]
    gate.set()
    wait_until(lambda: flow_rows(client)[0].running == 0 and flow_rows(client)[0].held == 0, timeout=10)


def test_the_dashboard_overview_has_a_flow_control_table(dashboard, start, registry, client):  # noqa: F811
    _, gate = _busy(start, registry, client)
    _, _, page = request(dashboard(), "GET", "/")
    assert "<h2>Flow control</h2>" in page
    assert '<td>charge</td><td>default</td><td class="num">2/2</td><td class="num">3</td>' in page
    gate.set()


def test_the_metrics_export_running_limit_and_held_per_limited_workflow(start, registry, client):
    observer = MetricsObserver()
    metrics = MetricsServer(observer, port=0).start()
    try:
        worker, gate = _busy(start, registry, client, observers=[observer])
        observer.attach(worker)
        samples = scrape(metrics.url)
        assert value(samples, "redflow_flow_running_runs", workflow="charge") == 2
        assert value(samples, "redflow_flow_limit", workflow="charge") == 2
        assert value(samples, "redflow_flow_held_runs", workflow="charge") == 3
        assert ("redflow_flow_running_runs", frozenset({"workflow": "plain"}.items())) not in samples
        gate.set()
    finally:
        metrics.stop()
