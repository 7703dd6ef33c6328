"""Log records about runs carry run_id / workflow / attempt, and --log-format json prints them as keys."""

import logging
import os
import re
import subprocess
import tempfile
from pathlib import Path

import gevent
import orjson
import pytest
from helpers import CLI, ROOT, wait_until

from redflow import define_workflow
from redflow.ops.observe.logs import JsonFormatter

RUN_FIELDS = ("run_id", "workflow", "attempt")


def json_records(caplog, run_id):
    """The captured records about ``run_id``, formatted as the JSON log format prints them."""
    return [orjson.loads(JsonFormatter().format(rec)) for rec in caplog.records if getattr(rec, "run_id", None) == run_id]


def test_records_about_run_outcomes_carry_run_id_workflow_and_attempt(start, registry, client, caplog):
    @define_workflow("wobbly", registry=registry, max_attempts=2)
    def wobbly(ctx):
        raise RuntimeError(f"attempt {ctx.run.attempt} fails")

    @define_workflow("napping", registry=registry)
    def napping(ctx):
        gevent.sleep(30)

    caplog.set_level(logging.INFO, logger="redflow")
    start()
    failing = client.run("wobbly")
    with pytest.raises(Exception, match="attempt 2 fails"):
        failing.result(15)
    napper = client.run("napping")
    wait_until(lambda: napper.status() == "running", timeout=10)
    client.cancel(napper.id)
    wait_until(lambda: json_records(caplog, napper.id), timeout=10)

    retried, failed = wait_until(lambda: len(recs := json_records(caplog, failing.id)) >= 2 and recs, timeout=10)[:2]
    assert (retried["level"], retried["logger"], retried["workflow"], retried["attempt"]) == ("info", "redflow.worker", "wobbly", 1)
    assert "attempt 1 failed" in retried["message"]
    in_s = re.search(r"; retry in (\d+\.\d\d)s$", retried["message"])
    assert in_s and 0 <= float(in_s.group(1)) <= 0.35, retried["message"]  # the 250-349 ms backoff, not an epoch-ms time
    assert (failed["level"], failed["workflow"], failed["attempt"]) == ("warning", "wobbly", 2) and "failed" in failed["message"]
    (canceled,) = json_records(caplog, napper.id)
    assert {k: canceled[k] for k in RUN_FIELDS} == {"run_id": napper.id, "workflow": "napping", "attempt": 1}
    assert canceled["message"] == f"run {napper.id} canceled"


def test_a_lost_lease_record_names_the_workflow_and_attempt(start, registry, client, caplog, r):
    @define_workflow("stolen", registry=registry)
    def stolen(ctx):
        gevent.sleep(30)

    caplog.set_level(logging.INFO, logger="redflow")
    start(lease_ms=300)
    handle = client.run("stolen")
    wait_until(lambda: r.get(client.keys.run_lease(handle.id)), timeout=10)
    r.delete(client.keys.run_lease(handle.id))
    try:
        lost = wait_until(lambda: [rec for rec in json_records(caplog, handle.id) if "lease lost" in rec["message"]], timeout=10)
        assert {k: lost[0].get(k) for k in RUN_FIELDS} == {"run_id": handle.id, "workflow": "stolen", "attempt": 1}
    finally:
        client.cancel(handle.id)  # so that the worker stops at once


def test_the_worker_command_prints_one_json_object_per_line_with_the_run_fields(redis_url, prefix, cli_client):
    with tempfile.NamedTemporaryFile(prefix="redflow-json-log-", suffix=".log") as out:
        cmd = [CLI, "--log-format", "json", "worker", "-A", "tests.apps.cli_app:registry", "--prefix", prefix, "--lease-ms", "1000"]
        env = dict(os.environ, REDIS_URL=redis_url, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            broken = cli_client.run("count", {"n": 1}, max_attempts=2)  # no "key": the handler raises KeyError
            with pytest.raises(Exception, match="KeyError"):
                broken.result(20)
            proc.terminate()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        lines = Path(out.name).read_text().splitlines()
    records = [orjson.loads(line) for line in lines]  # every line is one JSON object
    assert {"worker started", "worker stopped"} <= {rec["message"].split(":")[0] for rec in records}
    about_run = [rec for rec in records if rec.get("run_id") == broken.id]
    assert [(rec["level"], rec["workflow"], rec["attempt"]) for rec in about_run] == [("info", "count", 1), ("warning", "count", 2)]
    assert all(rec["logger"] == "redflow.worker" and rec["ts"] > 0 for rec in about_run)


FORGED = "2026-12-04 17:00:00,000 CRITICAL redflow.worker: FORGED"


def test_the_text_format_keeps_each_record_on_its_own_lines_whatever_the_message(start, registry, client):
    """A newline, CR or escape sequence in run data (here an error message) cannot forge a record:
    messages are escaped, and traceback lines are indented, so column 0 only ever starts a record."""
    import io

    from redflow.ops.observe.logs import setup_logging

    stream = io.StringIO()
    setup_logging("info", "text", stream)
    try:

        @define_workflow("forger", registry=registry, max_attempts=1)
        def forger(ctx):
            raise RuntimeError(f"bad\n{FORGED}\r\x1b[2K")

        worker = start()
        with pytest.raises(Exception, match="FORGED"):
            client.run("forger").result(10)
        worker.stop(timeout=5)  # the client may see the run end before the worker logs it: let it finish
        logging.getLogger("redflow.worker").exception("message\n%s", FORGED, exc_info=RuntimeError(f"x\n{FORGED}"))
    finally:
        logging.getLogger().handlers.clear()
    lines = stream.getvalue().splitlines()
    assert any("\\n" + FORGED in line for line in lines)  # escaped in the failure record
    assert any("\\r\\x1b[2K" in line for line in lines)
    starts = [line for line in lines if not line.startswith(" ")]
    assert starts and all(line[:4].isdigit() for line in starts), starts  # every column-0 line is a record's start
    assert not any(line.startswith(FORGED) for line in lines)
