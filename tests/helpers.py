"""Small helpers shared by the tests."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import gevent
import pytest

from redflow import NonRetryableError, define_workflow

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).with_name("redflow-gevent"))

#: ``REDFLOW_LONG_TESTS=1``: the long form of the suite's budgeted tests (the random-interleaving
#: state machines with their full example counts, the 20,000-run load test). scripts/test runs the
#: bounded form: the same invariants on fewer examples or runs, so the suite stays within its time.
LONG_TESTS = os.environ.get("REDFLOW_LONG_TESTS") == "1"


@contextmanager
def started(harness: Any, what: str) -> Iterator[Any]:
    """Start a redis-server harness for a fixture: a clear failure (never a
    silent skip) when it cannot start, and cleaned up afterwards."""
    try:
        harness.start()
    except Exception as exc:
        harness.cleanup()
        pytest.fail(f"cannot start {what}: {exc}", pytrace=False)
    try:
        yield harness
    finally:
        harness.cleanup()


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01, message: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}")
        gevent.sleep(interval)


def request(port: int, method: str, path: str, form: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Any:
    """An HTTP request to 127.0.0.1:``port``: (status, headers, body text); redirects are returned, not followed."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = urlencode(form).encode() if form is not None else None
    sent = dict(headers or {})
    if body is not None:
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        conn.request(method, path, body=body, headers=sent)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode()
    finally:
        conn.close()


def write_run(r: Any, client: Any, run_id: str, fields: dict[str, str]) -> None:
    """Write a run hash by hand, as another client would (and, on Redis
    Cluster, the run-queues entry that lets the client find it by id)."""
    queue = fields.get("queue", "default")
    r.hset(client.keys.run(run_id, queue), mapping=fields)
    if client.keys.cluster:
        r.hset(client.keys.run_queues(), run_id, queue)


class WorkerProcess:
    """``redflow-gevent worker`` as a subprocess; its output goes to a file so a
    chatty worker can never block on a full pipe."""

    def __init__(self, redis_url: str, prefix: str, *extra: str, concurrency: int = 4, app: str = "tests.apps.cli_app:registry",
                 lease_ms: int = 1000, wrapper: Sequence[str] = ()) -> None:  # fmt: skip
        """``wrapper``: a command the worker runs under, e.g. ``("faketime", "-f", "+1h")``."""
        env = dict(os.environ, REDIS_URL=redis_url, PYTHONPATH=str(ROOT))
        cmd = [*wrapper, CLI, "worker", "-A", app, "-c", str(concurrency), "--prefix", prefix, "--lease-ms", str(lease_ms), *extra]
        self.log = tempfile.NamedTemporaryFile(prefix="redflow-worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.log.close()
        os.unlink(self.log.name)


def write_finished_runs(r: Any, client: Any, runs: Sequence[dict[str, Any]], batch: int = 5000) -> list[str]:
    """Write finished runs by hand, pipelined, with every index a worker keeps
    (created, status, per-workflow), as another client's worker would leave
    them. Each item gives ``workflow``, ``status``, ``created``, ``started``
    (or None) and ``finished`` (ms), optionally ``error`` (JSON text)."""
    ids = []
    pipe = r.pipeline(transaction=False)
    for index, run in enumerate(runs):
        run_id = f"run_{uuid.uuid4()}"
        ids.append(run_id)
        fields = {"workflow": run["workflow"], "queue": "default", "status": run["status"], "inputJson": "null", "attempt": "1",
                  "maxAttempts": "1", "createdAt": str(run["created"]), "finishedAt": str(run["finished"])}  # fmt: skip
        if run.get("started") is not None:
            fields["startedAt"] = str(run["started"])
        if run.get("error"):
            fields["errorJson"] = run["error"]
        pipe.hset(client.keys.run(run_id), mapping=fields)
        pipe.zadd(client.keys.runs_created(), {run_id: run["created"]})
        pipe.zadd(client.keys.workflow_runs(run["workflow"]), {run_id: run["created"]})
        pipe.zadd(client.keys.runs_status(run["status"]), {run_id: run["finished"]})
        if index % batch == batch - 1:
            pipe.execute()
    pipe.execute()
    return ids


def charge_and_parked(registry: Any, **charge_options: Any) -> None:
    """Two workflows of the operations tests: ``charge`` (fails for good when
    its input says ``fail``) and ``parked`` (on a queue no test worker serves)."""

    @define_workflow("charge", registry=registry, max_attempts=1, **charge_options)
    def charge(ctx: Any) -> str:
        if ctx.input.get("fail"):
            raise NonRetryableError("declined")
        return "ok"

    @define_workflow("parked", registry=registry, queue="parking")
    def parked(ctx: Any) -> None:
        return None


def nested(depth: int) -> list:
    """A JSON value nested ``depth`` lists deep: orjson decodes 1,024 levels and encodes 254."""
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def keyspace(r: Any, prefix: str) -> dict[str, object]:
    """Every key of ``prefix`` with its content (hashes, sorted sets; the type of
    the others): what a refused call must leave as it was."""
    out: dict[str, object] = {}
    for key in r.scan_iter(f"{prefix}:*", count=1000):  # COUNT: the session server may hold 100,000s of other tests' keys
        kind = r.type(key)
        out[key] = r.hgetall(key) if kind == "hash" else r.zrange(key, 0, -1, withscores=True) if kind == "zset" else kind
    return out
