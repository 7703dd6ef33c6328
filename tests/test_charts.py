"""Charts and the run timeline: valid SVG for an empty Redis, one run and 100,000 runs;
tallies that add up; replayed steps marked; parent and children linked both ways."""

import re
import xml.etree.ElementTree as ET

import pytest
from helpers import request, wait_until, write_finished_runs

from redflow import define_workflow
from redflow.core import tally
from redflow.ops.dashboard import serve
from redflow.ops.dashboard.series import CHART_NAMES

SVG = "{http://www.w3.org/2000/svg}"
BAR_TITLE = re.compile(r"^\d\d:\d\d: (\d+) (succeeded|failed|canceled)$")


@pytest.fixture
def port(client):
    server = serve(client, "127.0.0.1", 0)
    yield server.server_port
    server.stop(timeout=1)


def svg(port, path):
    """The parsed SVG at ``path`` (fails unless it is well-formed SVG served as such)."""
    status, headers, body = request(port, "GET", path)
    assert status == 200 and headers["content-type"] == "image/svg+xml; charset=utf-8", body[:300]
    root = ET.fromstring(body.encode())
    assert root.tag == f"{SVG}svg" and not list(root.iter(f"{SVG}script"))
    assert "<script" not in body and "javascript:" not in body
    return root


def bars(root):
    """{status: total} over the bars of a throughput chart (read from their titles)."""
    totals = {}
    for rect in root.iter(f"{SVG}rect"):
        title = rect.find(f"{SVG}title")
        if title is not None and BAR_TITLE.match(title.text):
            n, status = BAR_TITLE.match(title.text).groups()
            totals[status] = totals.get(status, 0) + int(n)
    return totals


def every_chart(port):
    return {(name, window): svg(port, f"/charts/{name}.svg?window={window}") for name in CHART_NAMES for window in ("1h", "24h")}


def test_an_empty_redis_gives_valid_empty_charts_and_pages(port):
    charts = every_chart(port)
    assert all("no " in ET.tostring(root, encoding="unicode") for root in charts.values())  # each says it has nothing yet
    assert bars(charts["throughput", "1h"]) == {}
    for path in ("/", "/?window=24h"):
        status, _, page = request(port, "GET", path)
        assert status == 200 and page.count("<svg") == 4 and "No workers" in page
    for path in ("/workflows", "/workflows?window=7d"):
        status, _, page = request(port, "GET", path)
        assert status == 200 and "No workflows" in page
    for path, code in (("/charts/nope.svg", 404), ("/charts/throughput.svg?window=2h", 400), ("/?window=2h", 400),
                       ("/workflows?window=1w", 400), ("/runs/run_nope/timeline.svg", 404)):  # fmt: skip
        assert request(port, "GET", path)[0] == code, path


def test_one_run_shows_in_every_chart_once_its_worker_flushed(start, registry, client, port):
    @define_workflow("once", registry=registry)
    def once(ctx):
        return ctx.step.run("only", lambda: 1)

    worker = start(heartbeat_s=0.1)
    assert client.run("once").result(10) == 1
    wait_until(lambda: worker.heartbeat.beats >= 3 and tallied(client, tally.DURATION) == 1, timeout=10, message="the flush")
    assert tallied(client, tally.START) == 1
    charts = every_chart(port)
    assert bars(charts["throughput", "1h"]) == {"succeeded": 1} == bars(charts["throughput", "24h"])
    for name in ("start-latency", "duration", "depth"):
        marks = list(charts[name, "1h"].iter(f"{SVG}circle")) + list(charts[name, "1h"].iter(f"{SVG}polyline"))
        assert marks, name  # a point (or a line) was drawn


def tallied(client, kind):
    """Attempts counted in the current minute's bucket for ``kind``."""
    resolution = tally.RESOLUTIONS["1h"]
    total = 0
    for start in resolution.starts(client.now_ms())[-2:]:
        bucket = tally.parse_bucket(client.redis.hgetall(client.keys.stats_bucket(resolution.span_s, start)))
        total += sum(bucket.merged(kind))
    return total


@pytest.mark.heavy
def test_100000_runs_chart_exactly_and_the_pages_stay_bounded(client, r, registry, port):
    @define_workflow("bulk", registry=registry)
    def bulk(ctx):
        return None

    client.sync_registry(registry)
    now = client.now_ms()
    statuses = ("succeeded",) * 8 + ("failed", "canceled")
    runs = [
        {"workflow": "bulk", "status": statuses[i % 10], "created": now - 3_500_000 + i * 34, "started": now - 3_500_000 + i * 34 + 5,
         "finished": now - 3_500_000 + i * 34 + 5 + i % 250}
        for i in range(100_000)
    ]  # fmt: skip
    write_finished_runs(r, client, runs)
    charts = every_chart(port)
    assert bars(charts["throughput", "1h"]) == {"succeeded": 80_000, "failed": 10_000, "canceled": 10_000}
    assert bars(charts["throughput", "24h"]) == {"succeeded": 80_000, "failed": 10_000, "canceled": 10_000}

    status, _, page = request(port, "GET", "/workflows?window=1h")
    assert status == 200 and "100,000" in page and "figures from the newest 5,000 runs" in page
    status, _, page = request(port, "GET", "/")
    assert status == 200 and page.count("<svg") == 4 and len(page) < 400_000


def test_the_run_timeline_marks_replayed_steps_and_runs_link_to_parent_and_children(start, registry, client, port):
    @define_workflow("child", registry=registry)
    def child(ctx):
        return ctx.input * 2

    @define_workflow("parent", registry=registry, max_attempts=2)
    def parent(ctx):
        ctx.step.run("fetch", lambda: "data")
        doubled = ctx.step.run_workflow("spawn", "child", 21)
        if ctx.run.attempt == 1:
            raise RuntimeError("first attempt fails after its steps")
        return ctx.step.run("save", lambda: doubled)

    start(concurrency=2)
    handle = client.run("parent")
    assert handle.result(20) == 42
    root = svg(port, f"/runs/{handle.id}/timeline.svg")
    rects = {rect.find(f"{SVG}title").text.split(":")[0]: rect.get("class") for rect in root.iter(f"{SVG}rect")}
    assert "replayed" in rects["fetch"] and "replayed" in rects["spawn"] and "replayed" not in rects["save"]
    assert rects["run"] == "bar s-succeeded" and rects["waiting to start"] == "bar s-queued"

    (child_id,) = client.list_children(handle.id)
    _, _, page = request(port, "GET", f"/runs/{handle.id}")
    assert f'href="/runs/{child_id}"' in page and "Children (1)" in page and "replayed: ran in attempt 1" in page
    _, _, child_page = request(port, "GET", f"/runs/{child_id}")
    assert f'href="/runs/{handle.id}"' in child_page  # parent linked back


def test_histograms_bins_and_percentiles():
    assert [tally.bin_of(ms) for ms in (0, 1, 1.5, 2, 1000, 3_600_000, 3_600_001)] == [0, 0, 1, 1, 9, 19, 20]
    bins = [0] * (tally.OVERFLOW_BIN + 1)
    bins[tally.bin_of(7)] = 50  # 7 ms -> the 10 ms bin
    bins[tally.bin_of(400)] = 50  # 400 ms -> the 500 ms bin
    assert tally.histogram_percentile(bins, 50) == 10 and tally.histogram_percentile(bins, 51) == 500
    assert tally.histogram_percentile([0] * 21, 50) is None
    assert tally.nearest_rank(range(1, 21), 95) == 19 and tally.nearest_rank([5], 50) == 5 and tally.nearest_rank([], 50) is None
    bucket = tally.parse_bucket({"d:emails": "4", "r:3:w": "2", "r:3:v": "1", "s:99:w": "1", "x:1:w": "1", "r:1:w": "NaN"})
    assert bucket.depth == {"emails": 4} and bucket.merged(tally.DURATION)[3] == 3 and sum(bucket.merged(tally.START)) == 0
