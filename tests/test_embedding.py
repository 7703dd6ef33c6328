"""The embedding examples run for real: examples/web_app.py under gevent.pywsgi and under gunicorn -k gevent."""

import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

import orjson
import pytest
from helpers import ROOT, wait_until
from packaging.requirements import Requirement

from redflow.testing import free_port

GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def call(url, body=None):
    """(status, JSON body) of a GET, or of a POST when ``body`` is given."""
    data = None if body is None else orjson.dumps(body)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method="GET" if data is None else "POST"), timeout=30) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


def answers(url):
    try:
        return call(url)[0] == 404
    except OSError:  # not listening yet
        return False


class Server:
    """A server subprocess; output to a file so that it can never block on a pipe."""

    def __init__(self, cmd, redis_url, prefix):
        self.log = tempfile.NamedTemporaryFile(prefix="redflow-embed-", suffix=".log")
        env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        return Path(self.log.name).read_text(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def server(redis_url, prefix):
    started = []

    def start(kind):
        port = free_port()
        if kind == "pywsgi":
            cmd = [sys.executable, "examples/web_app.py", "--port", str(port)]
        else:
            cmd = [GUNICORN, "-c", "examples/gunicorn_conf.py", "-b", f"127.0.0.1:{port}", "examples.web_app:app"]
        srv = Server(cmd, redis_url, prefix)
        started.append(srv)
        srv.base = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(srv.base + "/") or srv.proc.poll() is not None, timeout=30, interval=0.1, message="the server")
        assert srv.proc.poll() is None, srv.output()
        return srv

    yield start
    for srv in started:
        srv.close()


@pytest.mark.parametrize("kind", ["pywsgi", "gunicorn"])
def test_the_example_app_runs_workflows_in_process_and_its_worker_stops_with_the_server(server, kind, client):
    srv = server(kind)
    status, started = call(srv.base + "/runs", {"name": "Ada"})
    assert status == 202 and started["id"].startswith("run_")
    status, run = call(f"{srv.base}/runs/{started['id']}?wait=20")
    assert status == 200 and run["status"] == "succeeded", run
    assert run["output"] == {"greeting": "Hello, Ada!", "shouted": "HELLO, ADA!"}

    assert call(srv.base + "/runs", {"name": ""}) == (
        400,
        {"error": "Workflow input validation failed: input needs a non-empty string 'name'"},
    )
    assert call(srv.base + "/runs/run_nope")[0] == 404
    assert call(f"{srv.base}/runs/{started['id']}?wait=soon") == (400, {"error": "wait must be a number of seconds"})
    request = urllib.request.Request(srv.base + "/runs", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400 and "unexpected character" in orjson.loads(refused.value.read())["error"]
    refused.value.close()

    _, slow = call(srv.base + "/runs", {"name": "Bob", "pause_s": 1.5})
    wait_until(lambda: client.get_run(slow["id"]).status == "running", timeout=20, message="the slow run to start")
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=60) == 0, srv.output()
    # The server stopped, and the embedded worker finished the run in flight before the process left.
    assert client.get_run(slow["id"]).status == "succeeded"
    assert "worker stopped" in srv.output()


def test_the_gunicorn_extra_installs_what_gunicorns_gevent_worker_imports():
    """`pip install gunicorn` alone fails under `-k gevent` in a fresh virtualenv
    (gunicorn's gevent worker imports `packaging`, a requirement of its gevent
    extra only): redflow's `gunicorn` extra, and the test extra, ask for `gunicorn[gevent]`."""
    ours = [Requirement(text) for text in metadata.requires("redflow-gevent") or ()]
    for extra in ("gunicorn", "test"):
        (gunicorn,) = [r for r in ours if r.name == "gunicorn" and r.marker is not None and r.marker.evaluate({"extra": extra})]
        assert gunicorn.extras == {"gevent"}, extra
    theirs = [Requirement(text) for text in metadata.requires("gunicorn") or ()]
    needed = {r.name for r in theirs if r.marker is not None and r.marker.evaluate({"extra": "gevent"})}
    assert "packaging" in needed and all(metadata.version(name) for name in needed)  # installed here, as for a user
    page = " ".join((ROOT / "docs" / "guide" / "embedding.md").read_text().split())
    assert 'pip install "redflow-gevent[gunicorn]"' in page and "No module named 'packaging'" in page
