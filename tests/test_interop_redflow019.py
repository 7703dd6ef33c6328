"""Interop with the asyncio ``redflow`` 0.1.9 from PyPI, the release its users
install today (issue 32), in both directions on one real redis-server:

- its client -> our worker -> its handle;
- our client -> its worker -> our handle;

with payloads over 1 KiB (``@blob:`` references), an app name (``app:queue``)
and steps (a run whose worker dies moves to the other worker and keeps its
steps). The 0.1.9 side runs in ``.venv-redflow019`` (scripts/setup-env --test)
through tests/interop/redflow019_driver.py; docs/interop.md has the layout.

A run that moves from our worker to its worker needs ours to write step
records as arrays: ``worker --compat redflow-0.1`` (its worker refuses the
object form).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gevent
import orjson
import pytest
from helpers import ROOT, WorkerProcess, wait_until
from test_data_model import SCOPED_QUEUES

from redflow import create_client
from redflow.core import blobs
from redflow.core.app_scope import scope_queue
from redflow.core.keys import Keys
from redflow.core.models import Step
from tests.apps import interop_app

PYTHON = ROOT / ".venv-redflow019" / "bin" / "python"
DRIVER = ROOT / "tests" / "interop" / "redflow019_driver.py"
RUN = "run_8c1e7c3a-1f2b-4d3c-9a4b-5e6f7a8b9c0d"
#: An input over 1 KiB in UTF-8 (700 two-byte characters): 0.1.9 stores it as a blob.
LARGE = {"text": "é" * 700}


class AsyncioRedflow:
    """redflow 0.1.9 (asyncio, PyPI) on the test's Redis and prefix, through its driver."""

    def __init__(self, url: str, prefix: str, app: str | None = None) -> None:
        self.argv = [str(PYTHON), "-I", str(DRIVER), "--url", url, "--prefix", prefix, *(["--app", app] if app else [])]
        # -I keeps this repository's redflow off its path; REDFLOW_APP / _PREFIX would change what it does
        self.env = {name: value for name, value in os.environ.items() if not name.startswith(("REDFLOW_", "PYTHON"))}

    def call(self, *args: str, timeout: float = 60) -> list[Any]:
        """One driver command to its end: the JSON lines it printed."""
        done = subprocess.run([*self.argv, *args], env=self.env, cwd="/", capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    @contextmanager
    def running(self, *args: str) -> Iterator[tuple[subprocess.Popen[str], Any]]:
        """A driver command in the background: (process, its stdout); killed on exit."""
        log = tempfile.NamedTemporaryFile(prefix="redflow019-", suffix=".log", delete=False)
        proc = subprocess.Popen([*self.argv, *args], env=self.env, cwd="/", stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            yield proc, proc.stdout
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.close()
            os.unlink(log.name)

    @contextmanager
    def worker(self) -> Iterator[subprocess.Popen[str]]:
        """A 0.1.9 worker of the driver's workflows (it syncs their metadata first)."""
        with self.running("worker") as (proc, out):
            assert read_line(out, 60) == {"ready": True}
            yield proc


def read_line(out: Any, timeout: float) -> Any:
    """The next JSON line of a background driver, failing after ``timeout`` seconds."""
    with gevent.Timeout(timeout, AssertionError(f"no line from the 0.1.9 driver within {timeout}s")):
        line = out.readline()
    assert line, "the 0.1.9 driver exited"
    return json.loads(line)


@pytest.fixture(autouse=True)
def _asyncio_redflow_installed(monkeypatch, redis_url: str) -> None:
    assert PYTHON.exists(), "redflow 0.1.9 is not installed: run scripts/setup-env --test"
    monkeypatch.setenv("REDIS_URL", redis_url)  # where the workflows of tests/apps/interop_app.py count steps


@pytest.fixture
def keys(prefix: str) -> Keys:
    return Keys(prefix)


def sync_our_workflows(redis_url: str, prefix: str) -> None:
    """Our workflows' metadata, which its client needs to start them by name."""
    ours = create_client(redis_url, prefix=prefix)
    ours.sync_registry(interop_app.registry)
    ours.close()


# -- the layout, side by side: no worker --------------------------------------


def test_blobs_either_side_writes_are_read_by_the_other(redis_url, prefix, r, keys):
    theirs = AsyncioRedflow(redis_url, prefix)
    compressible = orjson.dumps({"n": list(range(300)), **LARGE}).decode()
    (written,) = theirs.call("blob-store", RUN, compressible)
    assert written["stored"] == "@blob:" + blobs.field_for(compressible)
    blob_hash = r.hgetall(keys.run_blobs(RUN))
    assert blobs.resolve(written["stored"], blob_hash, run_id=RUN, field="inputJson") == compressible

    noise = orjson.dumps(os.urandom(1200).hex()).decode()  # does not compress below its base64's size: stored plain
    for text in (compressible + " ", noise):
        ours = blobs.encode(text, blobs.DEFAULT_THRESHOLD_BYTES)
        assert ours.blob is not None
        r.hset(keys.run_blobs(RUN), *ours.blob)
        assert theirs.call("blob-resolve", RUN, ours.value) == [{"json": text}]


def test_step_records_its_encoders_write_are_read_as_steps(redis_url, prefix):
    (line,) = AsyncioRedflow(redis_url, prefix).call("step-records")
    steps = {name: Step.from_json(name, raw) for name, raw in line["records"].items()}
    assert {name: (s.status, s.seq, s.attempt) for name, s in steps.items()} == {
        "running": ("running", 1, 1),
        "sleeping": ("running", 2, 1),
        "waiting": ("running", 3, 2),
        "succeeded": ("succeeded", 4, 2),
        "failed": ("failed", 5, 2),
        "canceled": ("canceled", 6, 3),
    }
    assert steps["succeeded"].output == {"a": 1} and steps["failed"].error == {"name": "Error", "message": "boom", "kind": "error"}
    assert steps["sleeping"].wait is not None and steps["sleeping"].wait.wake_at_ms == 1_700_000_060_000


def test_queue_names_are_scoped_by_app_as_its_client_and_worker_scope_them(redis_url, prefix):
    pairs = [list(app_queue) for app_queue, _ in SCOPED_QUEUES]
    (line,) = AsyncioRedflow(redis_url, prefix).call("scopes", json.dumps(pairs))
    assert line["queues"] == [scope_queue(app, queue) for app, queue in pairs]


# -- its client -> our worker -> its handle ----------------------------------


def test_a_large_input_from_its_client_is_run_by_our_worker_and_its_handle_reads_the_result(redis_url, prefix, r, keys, start):
    sync_our_workflows(redis_url, prefix)
    start(interop_app.registry)
    started, outcome = AsyncioRedflow(redis_url, prefix).call("run", "interop-echo", json.dumps(LARGE), "--wait-ms", "30000")
    assert r.hget(keys.run(started["id"]), "inputJson").startswith("@blob:v1:")  # it wrote a reference, not the JSON
    assert outcome == {"output": {"echo": LARGE, "by": "redflow-gevent"}}


def test_its_handle_waiting_on_a_run_hears_of_its_end_from_our_worker(redis_url, prefix, r, keys, start):
    """Its ``result()`` blocks on the run's terminal stream (XREAD, no poll while
    blocked): without an entry there it hears nothing until its timeout."""
    sync_our_workflows(redis_url, prefix)
    with AsyncioRedflow(redis_url, prefix).running("run", "interop-echo", '{"n":1}', "--wait-ms", "600000") as (_, out):
        run_id = read_line(out, 60)["id"]
        wait_until(lambda: any(c["cmd"] == "xread" for c in r.client_list()), timeout=30, message="its handle blocked in XREAD")
        start(interop_app.registry)
        wait_until(lambda: r.hget(keys.run(run_id), "status") == "succeeded", timeout=30)
        entries = r.xrange(keys.run_terminal(run_id))
        assert [fields for _, fields in entries] == [{"status": "succeeded", "finishedAt": r.hget(keys.run(run_id), "finishedAt")}]
        assert read_line(out, 30) == {"output": {"echo": {"n": 1}, "by": "redflow-gevent"}}


def test_its_app_scoped_client_reaches_our_worker_of_that_app(redis_url, prefix, r, keys, start):
    start(interop_app.registry, app="shop")
    meta = r.hgetall(keys.workflow("interop-echo"))
    assert (meta["app"], meta["queue"]) == ("shop", "shop:default")  # as its sync_registry writes them
    started, outcome = AsyncioRedflow(redis_url, prefix, app="shop").call("run", "interop-echo", '{"n":2}', "--wait-ms", "30000")
    assert r.hget(keys.run(started["id"]), "queue") == "shop:default"
    assert outcome == {"output": {"echo": {"n": 2}, "by": "redflow-gevent"}}


def test_a_run_its_worker_began_keeps_its_steps_when_our_worker_takes_it_over(redis_url, prefix, r, keys, start):
    """Its worker runs step "a" (a 3,000-byte output: a blob) and dies; ours takes
    the run over when the lease expires, replays "a" and finishes."""
    theirs = AsyncioRedflow(redis_url, prefix, app="shop")
    calls = f"{prefix}:calls"
    with theirs.worker() as asyncio_worker:
        (started,) = theirs.call("run", "interop-steps", json.dumps({"calls": calls, "size": 3000, "hang": "redflow 0.1.9"}))
        run_id = started["id"]
        wait_until(lambda: (r.hget(keys.run_steps(run_id), "a") or "").startswith("[1,"), timeout=30, message="step a done")
        asyncio_worker.send_signal(signal.SIGKILL)
    start(interop_app.registry, app="shop")
    assert theirs.call("wait", run_id, "--wait-ms", "30000") == [{"output": {"a_len": 3000, "by": "redflow-gevent"}}]
    assert r.hget(calls, "a") == "1"  # run once, by its worker; replayed by ours


# -- our client -> its worker -> our handle ----------------------------------


@pytest.mark.parametrize("threshold", [None, 1024])
def test_a_large_input_from_our_client_is_run_by_its_worker_and_our_handle_reads_its_large_output(redis_url, prefix, r, keys, threshold):
    options = {} if threshold is None else {"blob_threshold": threshold}
    ours = create_client(redis_url, prefix=prefix, **options)
    with AsyncioRedflow(redis_url, prefix).worker():
        handle = ours.run("interop-echo", LARGE)  # by name: the metadata its worker synced
        assert handle.result(30) == {"echo": LARGE, "by": "redflow 0.1.9"}
    assert r.hget(keys.run(handle.id), "outputJson").startswith("@blob:v1:")  # its worker wrote a reference
    assert r.hget(keys.run(handle.id), "inputJson").startswith("@blob:v1:" if threshold else "{")


def test_a_large_error_from_its_worker_reads_back_through_our_handle(redis_url, prefix):
    ours = create_client(redis_url, prefix=prefix)
    with AsyncioRedflow(redis_url, prefix).worker():
        handle = ours.run("interop-fail", {"size": 2000})
        with pytest.raises(Exception) as failed:
            handle.result(30)
    expected = {"name": "NonRetriableError", "message": "refused: " + "x" * 2000, "kind": "non_retriable"}
    error = getattr(failed.value, "error", None) or {}
    assert {name: value for name, value in error.items() if name != "stack"} == expected and "process_run" in error["stack"]


def test_our_app_scoped_client_reaches_its_worker_of_that_app(redis_url, prefix, r, keys):
    ours = create_client(redis_url, prefix=prefix, registry=interop_app.registry, app="shop")
    with AsyncioRedflow(redis_url, prefix, app="shop").worker():
        handle = ours.run("interop-echo", {"n": 3})  # from our registry: queue "default", scoped as "shop:default"
        assert handle.result(30) == {"echo": {"n": 3}, "by": "redflow 0.1.9"}
    assert r.hget(keys.run(handle.id), "queue") == "shop:default"


def test_a_run_our_worker_began_keeps_its_steps_when_its_worker_takes_it_over(redis_url, prefix, r, keys):
    """Ours (with --compat redflow-0.1: array step records) runs step "a" and dies
    (SIGKILL); its worker takes the run over when the lease expires, replays "a" and finishes."""
    ours = create_client(redis_url, prefix=prefix, registry=interop_app.registry, app="shop")
    calls = f"{prefix}:calls"
    compat = ("--app-name", "shop", "--compat", "redflow-0.1")
    with WorkerProcess(redis_url, prefix, *compat, app="tests.apps.interop_app:registry") as worker:
        handle = ours.run("interop-steps", {"calls": calls, "size": 3000, "hang": "redflow-gevent"})
        wait_until(lambda: worker.proc.poll() is not None or r.hget(keys.run_steps(handle.id), "a"), timeout=30)
        assert worker.proc.poll() is None, worker.output()
        worker.kill()
    with AsyncioRedflow(redis_url, prefix, app="shop").worker():
        assert handle.result(30) == {"a_len": 3000, "by": "redflow 0.1.9"}
    assert r.hget(calls, "a") == "1"


def test_the_0_1_9_side_is_the_pypi_package_not_this_repository():
    """The 0.1.9 side really is the PyPI package, not this repository's ``redflow``."""
    probe = subprocess.run([str(PYTHON), "-I", "-c", "import redflow; print(redflow.__file__)"], cwd=ROOT, capture_output=True, text=True)
    assert Path(probe.stdout.strip()).is_relative_to(ROOT / ".venv-redflow019") and DRIVER.exists()
