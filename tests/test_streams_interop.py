"""The asyncio ``redflow`` 0.1.9 client reads what a redflow-gevent worker streams
(docs/guide/streams.md, "Interop"): its ``get_run_stream`` lists the items of every
attempt, and its live ``read_stream`` follows a running run and stops when our
worker ends it (the end entry on the run's signal stream), not at its block timeout.
The 0.1.9 side runs in ``.venv-redflow019`` (scripts/setup-env --test)."""

import json
import os
import subprocess
from pathlib import Path

import gevent
import pytest

from redflow import define_workflow

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv-redflow019" / "bin" / "python"
DRIVER = ROOT / "tests" / "interop" / "redflow019_streams.py"


def driver(redis_url, prefix, *args):
    env = {name: value for name, value in os.environ.items() if not name.startswith(("REDFLOW_", "PYTHON"))}
    argv = [str(PYTHON), "-I", str(DRIVER), "--url", redis_url, "--prefix", prefix, *args]
    return subprocess.Popen(argv, env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def line_of(proc, timeout):
    with gevent.Timeout(timeout, AssertionError(f"no line from the 0.1.9 driver within {timeout}s")):
        line = proc.stdout.readline()
    assert line, f"the 0.1.9 driver exited: {proc.stderr.read()}"
    return json.loads(line)


@pytest.fixture(autouse=True)
def _installed():
    assert PYTHON.exists(), "redflow 0.1.9 is not installed: run scripts/setup-env --test"


def test_its_get_run_stream_lists_what_our_worker_streamed_in_every_attempt(start, client, registry, redis_url, prefix):
    @define_workflow("chatty", registry=registry, max_attempts=2)
    def chatty(ctx):
        ctx.stream({"token": "Hel", "try": ctx.run.attempt})
        ctx.stream({"token": "lo", "try": ctx.run.attempt})
        if ctx.run.attempt == 1:
            raise RuntimeError("once more")
        return "done"

    start()
    handle = client.run("chatty", None)
    assert handle.result(10) == "done"
    proc = driver(redis_url, prefix, "get", handle.id)
    records = line_of(proc, 60)["records"]
    assert proc.wait(30) == 0
    ours = client.read_stream(handle.id)
    assert [(r["attempt"], r["value"]) for r in records] == [(item.attempt, item.value) for item in ours]
    assert [r["attempt"] for r in records] == [1, 1, 2, 2]
    assert all(abs(r["ts"] / 1000 - item.written_at) < 1e-9 for r, item in zip(records, ours))


def test_its_live_reader_follows_our_run_and_stops_when_our_worker_ends_it(held, redis_url, prefix):
    handle, go = held
    proc = driver(redis_url, prefix, "read", handle.id, "--block-ms", "120000")
    try:
        assert line_of(proc, 60) == {"reading": True}
        assert line_of(proc, 30)["record"]["value"] == "one"
        go.set()
        assert line_of(proc, 30)["record"]["value"] == "two"
        # its XREAD blocks for 120 s: only the end entry our settle wrote stops it sooner
        assert line_of(proc, 60) == {"end": True}
    finally:
        proc.kill()
        proc.wait()
    assert handle.result(5) == "done"
