"""The dashboard over real HTTP: pages, escaping, filters, and token-guarded actions."""

import http.client
import os
import signal
import subprocess
from urllib.parse import urlencode, urlsplit

import gevent
import pytest
from helpers import CLI, ROOT, request, wait_until

from redflow import RedflowError, create_client, define_workflow
from redflow.core.models import WorkerRecord
from redflow.ops.dashboard import Dashboard, serve
from redflow.testing import free_port

TOKEN = "correct-horse-battery-staple"
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def dashboard(client):
    servers = []

    def start(token=TOKEN):
        server = serve(client, "127.0.0.1", 0, token=token)
        servers.append(server)
        return server.server_port

    yield start
    for server in servers:
        server.stop(timeout=1)


@pytest.fixture
def runs(start, registry, client):
    @define_workflow("render", registry=registry, cron=["*/10 * * * *"])
    def render(ctx):
        return ctx.step.run("html", lambda: {"title": ctx.input["title"]})

    @define_workflow("crash", registry=registry, max_attempts=1)
    def crash(ctx):
        ctx.step.run("fine", lambda: 1)
        ctx.step.run("boom", lambda: (_ for _ in ()).throw(ValueError(HOSTILE)))

    @define_workflow("held", registry=registry, queue="nobody-serves-this")
    def held(ctx):
        return None

    start(queues=["default"])
    ok = client.run("render", {"title": HOSTILE})
    assert ok.result(10) == {"title": HOSTILE}
    failed = client.run("crash")
    with pytest.raises(RedflowError):
        failed.result(10)
    return {"ok": ok.id, "failed": failed.id, "queued": client.run("held").id}


def test_the_overview_shows_queues_cron_and_runs_escaped_and_filterable(dashboard, runs, redis_url):
    port = dashboard()
    status, headers, page = request(port, "GET", "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in headers["content-security-policy"] and headers["x-frame-options"] == "DENY"
    assert all(run_id in page for run_id in runs.values())
    assert '<td>nobody-serves-this</td><td class="num">1</td>' in page  # its run waits in ready
    assert "<code>*/10 * * * *</code>" in page
    assert "ValueError: &lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert TOKEN not in page and redis_url not in page

    _, _, failed_only = request(port, "GET", "/?status=failed")
    assert runs["failed"] in failed_only and runs["ok"] not in failed_only
    _, _, render_only = request(port, "GET", "/?" + urlencode({"workflow": "render", "limit": 5}))
    assert runs["ok"] in render_only and runs["failed"] not in render_only
    assert '<option value="render" selected>render</option>' in render_only

    for query, message in (("status=lost", "Unknown status"), ("limit=0", "limit must be"), ("limit=x", "limit must be")):
        status, _, page = request(port, "GET", "/?" + query)
        assert status == 400 and message in page
    assert request(port, "GET", "/static/style.css")[1]["content-type"] == "text/css; charset=utf-8"
    assert request(port, "GET", "/nowhere")[0] == 404
    status, headers, _ = request(port, "POST", "/", form={})
    assert status == 405 and headers["allow"] == "GET, HEAD"


def test_a_run_page_shows_steps_outputs_and_errors(dashboard, runs):
    port = dashboard()
    status, _, page = request(port, "GET", f"/runs/{runs['failed']}")
    assert status == 200 and "status-failed" in page
    assert "<code>fine</code>" in page and "<code>1</code>" in page  # a step's output
    assert "<code>boom</code>" in page and "ValueError: &lt;script&gt;" in page and "<details><summary>stack</summary>" in page
    assert 'action="/runs/' + runs["failed"] + '/retry"' in page and "/cancel" not in page  # failed: retry only

    _, _, ok_page = request(port, "GET", f"/runs/{runs['ok']}")
    assert "<h2>Output</h2>" in ok_page and "&quot;title&quot;: &quot;&lt;script&gt;" in ok_page and "<h2>Actions</h2>" not in ok_page
    status, _, page = request(port, "GET", "/runs/run_missing")
    assert status == 404 and "No run run_missing." in page


def test_actions_need_the_token_by_post(dashboard, runs, client):
    port = dashboard()
    cancel = f"/runs/{runs['queued']}/cancel"
    assert request(port, "GET", cancel)[0] == 405
    status, _, page = request(port, "POST", cancel, form={"token": "wrong-token-of-length"})
    assert status == 403 and "Wrong or missing dashboard token" in page
    assert request(port, "POST", cancel, form={})[0] == 403
    assert client.get_run(runs["queued"]).status == "queued"

    status, headers, _ = request(port, "POST", cancel, form={"token": TOKEN, "reason": "from the dashboard"})
    assert status == 303 and urlsplit(headers["location"]).path == f"/runs/{runs['queued']}"
    run = client.get_run(runs["queued"])
    assert run.status == "canceled" and run.cancel_reason == "from the dashboard"
    _, _, page = request(port, "GET", headers["location"])
    assert "Run canceled." in page

    status, headers, _ = request(port, "POST", f"/runs/{runs['ok']}/cancel", headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 303 and headers["location"].endswith("notice=cancel-refused")
    status, headers, _ = request(port, "POST", f"/runs/{runs['failed']}/retry", form={"token": TOKEN})
    assert status == 303 and headers["location"].endswith("notice=retried")
    wait_until(lambda: client.get_run(runs["failed"]).attempt == 2, timeout=10)  # the worker ran it again
    assert request(port, "POST", "/runs/run_missing/retry", form={"token": TOKEN})[0] == 404
    assert request(port, "POST", cancel, form={"token": TOKEN, "pad": "x" * 9000})[0] == 413


def test_a_running_run_is_canceled_through_its_worker(dashboard, start, registry, client):
    @define_workflow("long", registry=registry)
    def long(ctx):
        gevent.sleep(30)

    start()
    handle = client.run("long")
    wait_until(lambda: handle.status() == "running", timeout=10)
    status, headers, _ = request(dashboard(), "POST", f"/runs/{handle.id}/cancel", form={"token": TOKEN})
    assert status == 303 and "notice=cancel" in headers["location"]
    wait_until(lambda: handle.status() == "canceled", timeout=10)


def test_without_a_token_actions_are_refused_and_not_offered(dashboard, runs, client):
    port = dashboard(token=None)
    _, _, page = request(port, "GET", f"/runs/{runs['queued']}")
    assert "Actions are off" in page and '<form class="action"' not in page
    status, _, page = request(port, "POST", f"/runs/{runs['queued']}/cancel", form={"token": ""})
    assert status == 403 and "Actions are off" in page
    assert client.get_run(runs["queued"]).status == "queued"
    with pytest.raises(RedflowError, match="at least 12 characters"):
        Dashboard(client, token="short")


def test_the_dashboard_command_serves_reads_its_token_from_the_environment_and_stops_on_sigterm(redis_url, prefix, runs, client):
    port = free_port()
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix, REDFLOW_DASHBOARD_TOKEN=TOKEN)
    proc = subprocess.Popen([CLI, "dashboard", "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: _answers(port) or proc.poll() is not None, timeout=30, interval=0.1, message="the dashboard")
        status, _, page = request(port, "GET", "/")
        assert status == 200 and runs["ok"] in page
        assert request(port, "POST", f"/runs/{runs['queued']}/cancel", form={"token": TOKEN})[0] == 303
        assert client.get_run(runs["queued"]).status == "canceled"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    short = subprocess.run([CLI, "dashboard", "--redis-url", redis_url, "--token", "short"], capture_output=True, text=True, timeout=60)
    assert short.returncode == 2 and "dashboard: the dashboard token must have at least 12 characters" in short.stderr


def _answers(port):
    try:
        return request(port, "GET", "/static/style.css")[0] == 200
    except OSError:  # not listening yet
        return False


def test_bad_requests_and_an_unreachable_or_corrupt_redis_get_clear_pages(dashboard, runs, client, r, redis_url, prefix):
    port = dashboard()
    status, _, page = request(port, "GET", "/?" + urlencode({"workflow": "w" * 201}))
    assert status == 400 and "The workflow name is too long." in page
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:  # a form that is not UTF-8
        conn.request(
            "POST", f"/runs/{runs['queued']}/cancel", body=b"token=\xff\xfe", headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        resp = conn.getresponse()
        assert resp.status == 400 and "The form is not valid." in resp.read().decode()
    finally:
        conn.close()

    r.hset(client.keys.run(runs["ok"]), "status", "exploded")
    status, _, page = request(port, "GET", f"/runs/{runs['ok']}")
    assert status == 500 and "Cannot show this: run " in page and "unknown status &#x27;exploded&#x27;" in page

    dead = create_client(f"redis://127.0.0.1:{free_port()}/0", prefix=prefix)
    server = serve(dead, "127.0.0.1", 0, token=TOKEN)
    try:
        status, _, page = request(server.server_port, "GET", "/")
        assert status == 503 and "Redis is unavailable" in page
    finally:
        server.stop(timeout=1)
        dead.close()


def nested(depth):
    """JSON text of a list nested ``depth`` deep."""
    return "[" * depth + "]" * depth


def test_one_run_with_a_payload_nested_too_deep_fails_no_page(dashboard, runs, client, r):
    """100,000 deep does not decode (orjson stops at 1,024): shown raw with a marker.
    300 deep decodes but does not encode indented (254): shown compact with a marker.
    The overview lists both; a 50 MB output is shown bounded."""
    port = dashboard()
    undecodable, unindentable, huge = (client.run("held").id for _ in range(3))
    r.hset(client.keys.run(undecodable, "nobody-serves-this"), "inputJson", '["<b>",' + nested(100_000) + "]")
    r.hset(client.keys.run(unindentable, "nobody-serves-this"), "inputJson", nested(300))
    r.hset(client.keys.run(huge, "nobody-serves-this"), mapping={"status": "succeeded", "outputJson": '"' + "x" * 50_000_000 + '"'})

    status, _, page = request(port, "GET", "/")
    assert status == 200 and all(run_id in page for run_id in (undecodable, unindentable, huge, *runs.values()))

    status, _, page = request(port, "GET", f"/runs/{undecodable}")
    assert status == 200 and "(unreadable, shown as stored: " in page and "depth limit exceeded" in page
    assert "[&quot;&lt;b&gt;&quot;,[[[[" in page and "<b>" not in page and len(page) < 40_000  # escaped, bounded
    status, _, page = request(port, "GET", f"/runs/{unindentable}")
    assert status == 200 and "(nested too deep to indent, shown compact)" in page and nested(300) in page
    status, _, page = request(port, "GET", f"/runs/{huge}")
    assert status == 200 and "... (cut)" in page and 20_000 < len(page) < 40_000


def test_the_workers_section_and_the_workflows_page_show_escaped_figures(dashboard, runs, client, r):
    port = dashboard()
    now = client.now_ms()
    for worker_id, seen in (("worker_live", now), ("worker_gone", now - 60_000)):
        record = WorkerRecord(
            id=worker_id, host=HOSTILE, pid=4242, version="0.1.0", queues=(HOSTILE,), slots=8, busy=1, done=17, failed=2,
            started_at=(now - 600_000) / 1000, seen_at=seen / 1000, beat_s=2.0, stopping=False, running=((runs["queued"], "held"),),
        )  # fmt: skip
        r.set(client.keys.worker(worker_id), record.to_json())
        r.zadd(client.keys.workers(), {worker_id: seen})
    status, _, page = request(port, "GET", "/")
    assert status == 200 and "<script" not in page and page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4
    assert 'worker-alive">alive' in page and 'worker-lost">lost' in page and "1 / 8" in page
    assert f'href="/runs/{runs["queued"]}"' in page  # what it runs, linked

    status, _, page = request(port, "GET", "/workflows?window=1h")
    assert status == 200 and '<a href="/?workflow=crash">crash</a>' in page
    row = page[page.index(">crash</a>") :].split("</tr>")[0]
    assert "0.0%" in row and "ValueError: &lt;script&gt;" in row and f'href="/runs/{runs["failed"]}"' in row
    render = page[page.index(">render</a>") :].split("</tr>")[0]
    assert "100.0%" in render and "<script" not in page
