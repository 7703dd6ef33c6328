"""A run's output stream on the dashboard over real HTTP: the run page's Stream
section (escaped), the live view as server-sent events (items as they are
written, the end, a reconnect with Last-Event-ID, its bound), and the HTTP
API's ``GET /api/runs/<id>/stream``. The page in a real browser is in
tests/test_browser_streams.py."""

import http.client
import json

import gevent
import pytest
from gevent.event import Event
from helpers import request, wait_until

from redflow import define_workflow
from redflow.ops.dashboard import serve

TOKEN = "correct-horse-battery-staple"
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def dashboard(client):
    """``dashboard()`` -> the server of a dashboard on 127.0.0.1 (``.server_port``, ``.application``)."""
    servers = []

    def start():
        server = serve(client, "127.0.0.1", 0, token=TOKEN)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(timeout=1)


class Events:
    """An open ``text/event-stream`` response, read an event at a time."""

    def __init__(self, port, path, headers=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.request("GET", path, headers=headers or {})
        self.response = self.conn.getresponse()

    def next(self, timeout=30):
        """The next event as {field: value}; comments (``: idle``) and the ``retry`` field (kept in ``.retry``) skipped."""
        fields = {}
        with gevent.Timeout(timeout, AssertionError(f"no event within {timeout}s")):
            while True:
                line = self.response.readline().decode()
                assert line, "the event stream ended"
                line = line.rstrip("\n")
                if not line:
                    self.retry = fields.pop("retry", getattr(self, "retry", None))
                    if fields:
                        return fields
                    continue
                if not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value

    def close(self):
        self.conn.close()


@pytest.fixture
def talk(registry, start):
    """A workflow that streams one item each time ``step`` is set, then ends."""
    step = Event()

    @define_workflow("talk", registry=registry)
    def talk(ctx):
        for n in range(ctx.input):
            ctx.stream({"n": n, "html": HOSTILE})
            step.wait(30)
            step.clear()
        return "done"

    start()
    return step


def test_the_run_page_shows_the_stream_escaped_and_live_only_while_the_run_runs(dashboard, client, talk):
    port = dashboard().server_port
    handle = client.run("talk", 2)
    wait_until(lambda: len(client.read_stream(handle.id)) == 1)
    status, _, page = request(port, "GET", f"/runs/{handle.id}")
    first = client.read_stream(handle.id)[0]
    assert status == 200 and "<h2>Stream</h2>" in page and HOSTILE not in page
    assert "<code>{&quot;n&quot;:0,&quot;html&quot;:&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;}</code>" in page
    assert f'data-src="/runs/{handle.id}/stream?after={first.id}"' in page and '<script src="/static/stream.js" defer></script>' in page
    status, headers, script = request(port, "GET", "/static/stream.js")
    assert status == 200 and headers["content-type"] == "text/javascript; charset=utf-8" and "textContent" in script
    assert "innerHTML" not in script
    for _ in range(2):
        talk.set()
        gevent.sleep(0.05)
    assert handle.result(10) == "done"
    status, _, page = request(port, "GET", f"/runs/{handle.id}")
    assert "2 item(s); the run ended." in page and "data-src" not in page and "<script" not in page


def test_a_finished_run_that_streamed_nothing_has_no_stream_section(dashboard, client, registry, start):
    @define_workflow("silent", registry=registry)
    def silent(ctx):
        return None

    start()
    handle = client.run("silent", None)
    handle.result(10)
    status, _, page = request(dashboard().server_port, "GET", f"/runs/{handle.id}")
    assert status == 200 and "<h2>Stream</h2>" not in page


def test_the_live_view_sends_items_as_they_are_written_then_the_end(dashboard, client, talk):
    port = dashboard().server_port
    handle = client.run("talk", 3)
    events = Events(port, f"/runs/{handle.id}/stream")
    try:
        headers = {k.lower(): v for k, v in events.response.getheaders()}
        assert events.response.status == 200 and headers["content-type"] == "text/event-stream; charset=utf-8"
        assert "script-src 'self'" in headers["content-security-policy"] and headers["cache-control"] == "no-store"
        seen = []
        for n in range(3):
            event = events.next()
            assert event["event"] == "item" and json.loads(json.loads(event["data"])["json"]) == {"n": n, "html": HOSTILE}
            seen.append(event["id"])
            talk.set()
        assert events.next() == {"event": "end", "data": '{"status":"succeeded"}'} and events.retry == "2000"
        assert seen == [item.id for item in client.read_stream(handle.id)]
    finally:
        events.close()


def test_the_live_view_goes_on_after_the_last_event_id_and_refuses_what_makes_no_sense(dashboard, client, talk):
    server = dashboard()
    port = server.server_port
    handle = client.run("talk", 3)
    for _ in range(2):
        wait_until(lambda: handle.status() == "running" and talk.is_set() is False)
        talk.set()
        gevent.sleep(0.05)
    wait_until(lambda: len(client.read_stream(handle.id)) == 3)
    first, second, third = client.read_stream(handle.id)
    events = Events(port, f"/runs/{handle.id}/stream?after={first.id}", {"Last-Event-ID": second.id})  # the header wins
    try:
        event = events.next()
        assert event.get("id") == third.id
    finally:
        events.close()
    assert request(port, "GET", "/runs/run_nope/stream")[0] == 404
    assert request(port, "GET", f"/runs/{handle.id}/stream?after=yesterday")[0] == 400
    assert request(port, "POST", f"/runs/{handle.id}/stream", {})[0] == 405
    server.application.live.max_live = 1
    held = Events(port, f"/runs/{handle.id}/stream")
    try:
        held.next()
        status, headers, _ = request(port, "GET", f"/runs/{handle.id}/stream")
        assert status == 503 and headers["retry-after"] == "30"
    finally:
        held.close()
    talk.set()
    assert handle.result(10) == "done"


def test_the_http_api_pages_a_runs_stream(dashboard, client, talk):
    port = dashboard().server_port
    handle = client.run("talk", 2)
    for _ in range(2):
        wait_until(lambda: not talk.is_set())
        talk.set()
        gevent.sleep(0.05)
    assert handle.result(10) == "done"
    items = client.read_stream(handle.id)

    def get(path, token=TOKEN):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = json.loads(response.read())
        conn.close()
        return response.status, body

    status, body = get(f"/api/runs/{handle.id}/stream?limit=1")
    assert status == 200 and body == {
        "items": [{"id": items[0].id, "attempt": 1, "at": items[0].written_at, "value": {"n": 0, "html": HOSTILE}}],
        "next": items[0].id,
    }
    status, body = get(f"/api/runs/{handle.id}/stream?after={body['next']}")
    assert status == 200 and [item["value"]["n"] for item in body["items"]] == [1] and body["next"] == items[1].id
    assert get(f"/api/runs/{handle.id}/stream?after={items[1].id}") == (200, {"items": [], "next": items[1].id})
    assert get("/api/runs/run_nope/stream")[0] == 404
    for query in ("after=yesterday", "limit=0", "limit=1001", "limit=ten"):
        status, body = get(f"/api/runs/{handle.id}/stream?{query}")
        assert status == 400 and body["error"]["name"] == "InvalidQuery", query
    assert get(f"/api/runs/{handle.id}/stream", token="wrong")[0] == 401
