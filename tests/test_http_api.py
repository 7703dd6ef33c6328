"""The dashboard's JSON HTTP API over real HTTP: runs started, read back once a
worker finished them, events, the token, and every bad request a 4xx JSON
error that creates no run."""

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess

import pytest
from helpers import ROOT, nested, request, wait_until

from redflow import RedflowError, create_client
from redflow.core.signals import MAX_WAITING_PER_NAME
from redflow.ops.cli.common import connect
from redflow.ops.dashboard import Dashboard, serve
from redflow.testing import free_port
from tests.apps import api_app

TOKEN = "correct-horse-battery-staple"
JSON = "application/json"


@pytest.fixture
def registry():
    return api_app.registry


@pytest.fixture
def dashboard(client):
    """``dashboard(token=..., **options)`` -> the port of a dashboard served on 127.0.0.1."""
    servers = []

    def start(token=TOKEN, **options):
        server = serve(client, "127.0.0.1", 0, token=token, **options)
        servers.append(server)
        return server.server_port

    yield start
    for server in servers:
        server.stop(timeout=1)


def call(port, method, path, body=None, *, token=TOKEN, raw=None, content_type=JSON, headers=None):
    """(status, lowercased headers, decoded JSON body) of one request; ``raw``: the body bytes as given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {"Authorization": f"Bearer {token}"} if token else {}
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None and content_type:
        sent["Content-Type"] = content_type
    sent.update(headers or {})
    try:
        conn.request(method, path, body=data, headers=sent)
        resp = conn.getresponse()
        text = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(text) if text else None
    finally:
        conn.close()


def error_of(answer):
    status, _, body = answer
    return status, body["error"]["name"]


def all_runs(client):
    return client.list_runs(limit=1000)


def test_a_run_started_over_http_is_read_back_with_its_output(dashboard, client, start):
    port = dashboard()
    start()
    body = {"workflow": "send-welcome", "input": {"user": 42}, "priority": 5, "tags": {"customer": "42"}}
    status, headers, created = call(port, "POST", "/api/runs", body)
    assert status == 201 and headers["content-type"] == JSON and set(created) == {"id", "status"}
    assert headers["location"] == f"/api/runs/{created['id']}" and headers["cache-control"] == "no-store"
    assert client.wait_for(created["id"], timeout=10).status == "succeeded"

    status, _, run = call(port, "GET", headers["location"])
    assert status == 200
    assert {k: run[k] for k in ("id", "workflow", "status", "output", "error", "attempt", "tags", "input", "queue")} == {
        "id": created["id"], "workflow": "send-welcome", "status": "succeeded", "output": {"sent_to": 42}, "error": None,
        "attempt": 1, "tags": {"customer": "42"}, "input": {"user": 42}, "queue": "default",
    }  # fmt: skip
    assert run["finished_at"] >= run["created_at"] > 0

    assert error_of(call(port, "GET", "/api/runs/run_missing")) == (404, "RunNotFoundError")


def test_a_delayed_run_is_scheduled_and_an_idempotent_repeat_answers_201_with_the_same_run(dashboard, client):
    port = dashboard()
    body = {"workflow": "send-welcome", "input": {"user": 1}, "delay": 3600, "idempotency_key": "welcome-1"}
    first = call(port, "POST", "/api/runs", body)
    again = call(port, "POST", "/api/runs", {**body, "input": {"user": 2}})
    assert first[0] == again[0] == 201 and first[2] == again[2] == {"id": first[2]["id"], "status": "scheduled"}
    assert [r.id for r in all_runs(client)] == [first[2]["id"]] and all_runs(client)[0].input == {"user": 1}


BAD_RUNS = [
    # (body, or raw bytes; the status and error name answered)
    (b'{"workflow": "send-welcome",', 400, "InvalidJSON"),
    (b"\xff\xfe", 400, "InvalidJSON"),
    (b"", 400, "InvalidJSON"),
    (b'["send-welcome"]', 400, "InvalidJSON"),
    (b'{"workflow": "send-welcome", "input": {"user": 1}, "delay": 1e400}', 400, "InvalidJSON"),
    ({"input": {"user": 1}}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "priorty": 5}, 400, "InvalidField"),
    ({"workflow": "", "input": {"user": 1}}, 400, "InvalidField"),
    ({"workflow": ["send-welcome"], "input": {"user": 1}}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "priority": 10}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "priority": "5"}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "priority": True}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "delay": -1}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "delay": "60"}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "tags": {"customer": 42}}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "tags": ["customer=42"]}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": 1}, "idempotency_key": ""}, 400, "InvalidField"),
    ({"workflow": "send-welcome", "input": {"user": "42"}}, 400, "InputValidationError"),  # the schema refuses it
    ({"workflow": "send-welcome"}, 400, "InputValidationError"),
    ({"workflow": "no-such-workflow", "input": {}}, 404, "UnknownWorkflowError"),
]


def wrong_answers_to_bad_runs(port):
    """The BAD_RUNS the API at ``port`` does not answer as listed, with a JSON error that has a message."""
    wrong = []
    for body, status, name in BAD_RUNS:
        raw = body if isinstance(body, bytes) else None
        answered, headers, reply = call(port, "POST", "/api/runs", None if raw is not None else body, raw=raw)
        if (answered, reply["error"]["name"] if reply else None) != (status, name) or headers["content-type"] != JSON:
            wrong.append((body, answered, reply))
        elif not reply["error"]["message"]:
            wrong.append((body, "no message"))
    return wrong


def test_bad_requests_are_4xx_json_errors_naming_the_problem_and_create_no_run(dashboard, client, start):
    port = dashboard()
    start()  # subscribers and metadata synced: nothing but the request is missing
    assert wrong_answers_to_bad_runs(port) == []
    _, _, reply = call(port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": 1}, "priorty": 5})
    assert "'priorty'" in reply["error"]["message"]  # the typo is named
    _, _, reply = call(port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": "42"}})
    assert reply["error"]["message"] == 'Workflow input validation failed: input["user"]: "42" is not of type integer'
    assert all_runs(client) == []


def test_a_dashboard_without_the_workflows_code_refuses_what_its_synced_schema_refuses(redis_url, prefix, client, registry, start):
    """`redflow-gevent dashboard` imports no workflow code: it checks input against the JSON Schema the workers synced."""
    start()  # a worker syncs send-welcome's metadata and JSON Schema
    wait_until(lambda: client.redis.exists(client.keys.workflow("send-welcome")), message="the worker synced")
    bare = connect(argparse.Namespace(redis_url=redis_url, prefix=prefix))  # the client the dashboard command builds
    server = serve(bare, "127.0.0.1", 0, token=TOKEN)
    try:
        port = server.server_port
        assert wrong_answers_to_bad_runs(port) == []  # the schema's refusals included
        _, _, reply = call(port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": "42"}})
        assert reply["error"]["message"] == (
            "Workflow input validation failed (the JSON Schema synced for 'send-welcome', checked before the run is created): "
            'input["user"]: "42" is not of type integer'
        )
        refused_event = call(port, "POST", "/api/events", {"event": "user.created", "payload": {"user": "x"}})
        assert error_of(refused_event) == (400, "InputValidationError")
        assert all_runs(client) == []
        status, _, created = call(port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": 5}})
        assert status == 201 and client.wait_for(created["id"], timeout=10).status == "succeeded"
        assert client.get_run(created["id"]).output == {"sent_to": 5}
    finally:
        server.stop(timeout=1)
        bare.close()


def test_every_route_needs_the_bearer_token_compared_whole(dashboard, client):
    port = dashboard()
    run_id = call(port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": 1}})[2]["id"]
    routes = [("POST", "/api/runs"), ("GET", f"/api/runs/{run_id}"), ("POST", "/api/events"), ("POST", f"/api/runs/{run_id}/signal"),
              ("GET", "/api/nowhere"), ("DELETE", "/api/runs")]  # fmt: skip
    body = {"workflow": "send-welcome", "input": {"user": 2}}
    for method, path in routes:
        for headers in ({}, {"Authorization": "Bearer wrong-token-of-length"}, {"Authorization": f"Bearer {TOKEN[:-1]}"},
                        {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}):  # fmt: skip
            status, answer_headers, reply = call(port, method, path, body, token=None, headers=headers)
            assert (status, reply["error"]["name"]) == (401, "Unauthorized"), (method, path, headers)
            assert answer_headers["www-authenticate"] == 'Bearer realm="redflow"'
    assert [r.id for r in all_runs(client)] == [run_id]
    assert call(port, "GET", f"/api/runs/{run_id}", token="wrong-token-of-length")[2]["error"]["message"] == "Wrong dashboard token."
    assert "Authorization: Bearer <token>" in call(port, "GET", f"/api/runs/{run_id}", token=None)[2]["error"]["message"]
    assert call(port, "GET", f"/api/runs/{run_id}", token=None, headers={"Authorization": f"bearer  {TOKEN}"})[0] == 200


def test_without_a_token_the_api_is_off_while_the_pages_stay_readable(dashboard, client):
    port = dashboard(token=None)
    for method, path in (("POST", "/api/runs"), ("GET", "/api/runs/run_x"), ("POST", "/api/events"), ("GET", "/api")):
        status, _, reply = call(port, method, path, {"workflow": "send-welcome", "input": {"user": 1}})
        assert (status, reply["error"]["name"]) == (403, "ApiOff")
        assert reply["error"]["message"] == "The HTTP API is off: start the dashboard with --token or REDFLOW_DASHBOARD_TOKEN."
    assert request(port, "GET", "/")[0] == 200
    assert all_runs(client) == []


def test_wrong_methods_routes_and_content_types_are_refused(dashboard, client):
    port = dashboard()
    status, headers, reply = call(port, "GET", "/api/runs")
    assert (status, reply["error"]["name"], headers["allow"]) == (405, "MethodNotAllowed", "POST")
    status, headers, _ = call(port, "DELETE", "/api/runs/run_x")
    assert (status, headers["allow"]) == (405, "GET")
    assert call(port, "GET", "/api/events")[0] == 405 and call(port, "GET", "/api/runs/run_x/signal")[0] == 405
    assert error_of(call(port, "GET", "/api/runs/run_x/steps")) == (404, "NotFound")
    body = {"workflow": "send-welcome", "input": {"user": 1}}
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        assert error_of(call(port, "POST", "/api/runs", body, content_type=content_type)) == (415, "UnsupportedMediaType")
    assert call(port, "POST", "/api/runs", body, content_type="application/json; charset=utf-8")[0] == 201
    assert call(port, "POST", "/api/runs", body, content_type="application/vnd.api+json")[0] == 201
    assert len(all_runs(client)) == 2


def raw_exchange(port, head: bytes, body: bytes) -> bytes:
    """Send a request's head and part of its body, never finish it, and read what the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        return answer


def test_a_body_over_the_limit_is_413_by_content_length_before_reading_and_chunked_while_reading(dashboard, client):
    port = dashboard(max_body_bytes=1000)
    head = f"POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
    # Content-Length over the limit: the answer comes though not one byte of the body was sent.
    answer = raw_exchange(port, (head + "Content-Length: 10000000\r\n\r\n").encode(), b"")
    assert answer.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in answer
    # Chunked and never finished: the server stops reading one byte past the limit.
    chunk = b'{"workflow": "send-welcome", "input": {"pad": "' + b"x" * 1000
    answer = raw_exchange(port, (head + "Transfer-Encoding: chunked\r\n\r\n").encode(), b"%x\r\n%s\r\n" % (len(chunk), chunk))
    assert answer.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in answer

    # Under the limit, chunked or not, it is served.
    body = json.dumps({"workflow": "send-welcome", "input": {"user": 1}}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/api/runs", body=iter([body[:10], body[10:]]), encode_chunked=True,
                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": JSON, "Transfer-Encoding": "chunked"})  # fmt: skip
    assert conn.getresponse().status == 201
    conn.close()
    padded = {"workflow": "send-welcome", "input": {"user": 1, "pad": "x" * 1100}}
    assert error_of(call(port, "POST", "/api/runs", padded)) == (413, "ContentTooLarge")
    assert len(all_runs(client)) == 1


def test_an_event_starts_its_subscribers_and_says_which(dashboard, client, start):
    port = dashboard()
    start()
    body = {"event": "user.created", "payload": {"user": 7}, "idempotency_key": "signup-7"}
    status, _, reply = call(port, "POST", "/api/events", body)
    assert status == 202 and reply["event"] == "user.created" and len(reply["run_ids"]) == 1
    assert client.wait_for(reply["run_ids"][0], timeout=10).status == "succeeded"
    assert call(port, "GET", f"/api/runs/{reply['run_ids'][0]}")[2]["output"] == {"sent_to": 7}
    assert call(port, "POST", "/api/events", body)[2] == reply  # the same key: the same run, not a second
    assert call(port, "POST", "/api/events", {"event": "nobody.listens"})[2] == {"event": "nobody.listens", "run_ids": []}

    assert error_of(call(port, "POST", "/api/events", {"event": "user.created", "payload": {"user": "x"}})) == (400, "InputValidationError")
    assert error_of(call(port, "POST", "/api/events", {"payload": {}})) == (400, "InvalidField")
    assert error_of(call(port, "POST", "/api/events", {"event": "user.created", "data": {}})) == (400, "InvalidField")
    assert len(all_runs(client)) == 1


def test_a_signal_over_http_reaches_the_waiting_run_and_a_refused_one_says_why_and_stores_nothing(dashboard, client, start, r):
    port = dashboard()
    start()
    done = call(port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": 1}})[2]["id"]
    client.wait_for(done, timeout=10)
    review = call(port, "POST", "/api/runs", {"workflow": "review", "input": {"doc": 7}})[2]["id"]
    wait_until(lambda: client.get_run(review).parked_for == "signal", message="the review to wait for its signal")
    status, _, reply = call(port, "POST", f"/api/runs/{review}/signal", {"name": "approve", "payload": {"by": "ada"}})
    assert (status, reply) == (202, {"id": review, "signal": "approve"})
    assert client.wait_for(review, timeout=10).outcome() == {"doc": 7, "approved_by": "ada"}

    signal = {"name": "approve", "payload": {"by": "bob"}}
    assert error_of(call(port, "POST", "/api/runs/run_missing/signal", signal)) == (404, "RunNotFoundError")
    assert error_of(call(port, "POST", f"/api/runs/{done}/signal", signal)) == (409, "RunFinished")
    assert error_of(call(port, "POST", f"/api/runs/{review}/signal", signal)) == (409, "RunFinished")
    assert error_of(call(port, "POST", f"/api/runs/{done}/signal", {"payload": 1})) == (400, "InvalidField")
    assert error_of(call(port, "POST", f"/api/runs/{done}/signal", {"name": "x" * 201})) == (400, "InvalidField")
    assert error_of(call(port, "GET", f"/api/runs/{done}/signal")) == (405, "MethodNotAllowed")
    later = client.run("send-welcome", {"user": 2}, delay=3600).id
    deep = {"name": "approve", "payload": nested(300)}  # parses (1,024 levels), does not encode (254)
    assert error_of(call(port, "POST", f"/api/runs/{later}/signal", deep)) == (400, "InputValidationError")
    assert [key for key in r.scan_iter(f"{client.prefix}:*:signals", count=1000)] == []


def test_a_signal_past_the_runs_bound_is_a_429_and_stores_nothing(dashboard, client, r):
    port = dashboard()
    later = client.run("send-welcome", {"user": 2}, delay=3600).id
    for n in range(MAX_WAITING_PER_NAME):
        client.signal(later, "approve", n)
    kept = r.hgetall(client.keys.run_signals(later))
    assert error_of(call(port, "POST", f"/api/runs/{later}/signal", {"name": "approve"})) == (429, "SignalBufferFullError")
    assert r.hgetall(client.keys.run_signals(later)) == kept


def test_a_run_whose_output_does_not_decode_or_nests_too_deep_is_still_served(dashboard, client, r):
    port = dashboard()
    run_id = client.run("send-welcome", {"user": 1}).id
    key = client.keys.run(run_id, "default")
    r.hset(key, mapping={"status": "succeeded", "outputJson": "{not json"})
    status, _, run = call(port, "GET", f"/api/runs/{run_id}")
    assert status == 200 and run["output"]["raw"] == "{not json" and run["output"]["reason"]
    r.hset(key, "outputJson", "[" * 300 + "]" * 300)  # decodes (1,024 levels), does not encode (254)
    status, _, run = call(port, "GET", f"/api/runs/{run_id}")
    assert status == 200 and run["output"]["raw"] is None and "nested" in run["output"]["reason"] and run["input"] == {"user": 1}


def test_a_corrupt_run_is_a_500_and_redis_down_a_503_both_json(dashboard, client, r, prefix):
    port = dashboard()
    run_id = client.run("send-welcome", {"user": 1}).id
    r.hset(client.keys.run(run_id, "default"), "status", "exploded")
    status, _, reply = call(port, "GET", f"/api/runs/{run_id}")
    assert (status, reply["error"]["name"]) == (500, "CorruptDataError") and "unknown status 'exploded'" in reply["error"]["message"]

    dead = create_client(f"redis://127.0.0.1:{free_port()}/0", prefix=prefix)
    server = serve(dead, "127.0.0.1", 0, token=TOKEN)
    try:
        status, _, reply = call(server.server_port, "POST", "/api/runs", {"workflow": "send-welcome", "input": {"user": 1}})
        assert (status, reply["error"]["name"]) == (503, "RedisUnavailable")
    finally:
        server.stop(timeout=1)
        dead.close()
    with pytest.raises(RedflowError, match="max_body_bytes must be at least 1"):
        Dashboard(client, token=TOKEN, max_body_bytes=0)


# -- the page's curl examples, run against a dashboard --------------------------------

PAGE = ROOT / "docs" / "operations" / "http-api.md"
CURL_MARKER = "<!-- curl-example -->"
RUN_ID = re.compile(r"run_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def curl_examples():
    """(line, shell code, documented status, documented JSON) of each marked block of the page;
    the answer is documented in the comment lines under the command: ``# 201 Created``, then the JSON."""
    lines = PAGE.read_text().splitlines()
    for index in (i for i, line in enumerate(lines) if line.strip() == CURL_MARKER):
        assert lines[index + 1] == "```bash", f"{PAGE.name}:{index + 2}: a curl example is a bash block"
        end = lines.index("```", index + 2)
        block = lines[index + 2 : end]
        comments = [line[1:].strip() for line in block if line.startswith("#")]
        code = "\n".join(line for line in block if not line.startswith("#"))
        yield index + 3, code, int(comments[0].split()[0]), json.loads("".join(comments[1:]))


def comparable(value):
    """A JSON value with run ids and times replaced by placeholders (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: "<time>" if k.endswith("_at") and v is not None else comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return RUN_ID.sub("run_<id>", value) if isinstance(value, str) else value


def test_the_pages_curl_examples_answer_what_the_page_says(dashboard, client, start, registry, tmp_path):
    """Each example runs as written (``curl`` answering as documented, ``$RUN_ID`` the id the
    first example answered); the worker starts after the first, so that it answers ``queued``."""
    assert shutil.which("curl") and shutil.which("jq"), "the page's examples need curl and jq"
    port = dashboard()
    client.sync_registry(registry)
    headers = tmp_path / "headers"
    env = {"PATH": os.environ["PATH"], "DASHBOARD": f"http://127.0.0.1:{port}", "REDFLOW_DASHBOARD_TOKEN": TOKEN, "RUN_ID": ""}
    wrong, examples = [], list(curl_examples())
    assert len(examples) >= 5
    for line, code, status, documented in examples:
        script = f'curl() {{ command curl -D "{headers}" "$@"; }}\n{code}'
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{PAGE.name}:{line}: {done.stderr}"
        answered = int([h for h in headers.read_text().splitlines() if h.startswith("HTTP/")][-1].split()[1])
        body = json.loads(done.stdout)
        if (answered, comparable(body)) != (status, comparable(documented)):
            wrong.append((line, answered, body))
        if answered == 201 and not env["RUN_ID"]:
            env["RUN_ID"] = body["id"]
            start()
            client.wait_for(body["id"], timeout=10)
    assert wrong == []
