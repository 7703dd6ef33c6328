"""`redflow-gevent runs|queues|cron`: tables for people, --json for scripts, clear errors."""

import os
import subprocess

import orjson
import pytest
from helpers import CLI, ROOT, wait_until

from redflow import define_workflow
from redflow.core.flow import PRIORITY_MARKER
from redflow.ops.cli import build_parser
from redflow.testing import free_port


@pytest.fixture
def runs(start, registry, client):
    """One succeeded run (two steps), one failed run, one queued run of a workflow no worker serves."""

    @define_workflow("add", registry=registry)
    def add(ctx):
        total = ctx.step.run("sum", lambda: ctx.input["a"] + ctx.input["b"])
        return ctx.step.run("label", lambda: f"total={total}")

    @define_workflow("explode", registry=registry, max_attempts=1)
    def explode(ctx):
        raise RuntimeError("it <broke>")

    @define_workflow("parked", registry=registry, queue="parking")
    def parked(ctx):
        return None

    start(queues=["default"])
    ok = client.run("add", {"a": 1, "b": 2})
    assert ok.result(10) == "total=3"
    failed = client.run("explode")
    with pytest.raises(Exception, match="it <broke>"):
        failed.result(10)
    queued = client.run("parked")
    return {"ok": ok.id, "failed": failed.id, "queued": queued.id}


def test_runs_list_prints_a_table_and_json_filtered_by_workflow_and_status(cli, runs):
    code, out, _ = cli("runs", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["ID", "WORKFLOW", "STATUS", "ATTEMPT", "CREATED", "(UTC)", "DURATION"]
    assert [line.split()[0] for line in lines[1:]] == [runs["queued"], runs["failed"], runs["ok"]]  # newest first
    assert lines[3].split()[1:4] == ["add", "succeeded", "1/3"]

    code, out, _ = cli("runs", "list", "--workflow", "add", "--json")
    listed = orjson.loads(out)["runs"]
    assert code == 0 and [r["id"] for r in listed] == [runs["ok"]] and listed[0]["output"] == "total=3"
    code, out, _ = cli("runs", "list", "--status", "failed", "--json")
    assert [r["id"] for r in orjson.loads(out)["runs"]] == [runs["failed"]]
    assert cli("runs", "list", "--workflow", "nothing-here")[:2] == (0, "(no runs)\n")


def test_runs_show_prints_the_run_and_its_steps(cli, runs):
    code, out, _ = cli("runs", "show", runs["ok"])
    assert code == 0 and "status    succeeded" in out and 'output    "total=3"' in out
    steps = [line.split() for line in out.split("\n\n")[1].splitlines()]
    assert steps[0] == ["SEQ", "STEP", "STATUS", "DURATION", "OUTPUT", "/", "ERROR"]
    assert [(s[0], s[1], s[2], s[-1]) for s in steps[1:]] == [("1", "sum", "succeeded", "3"), ("2", "label", "succeeded", '"total=3"')]

    code, out, _ = cli("runs", "show", runs["failed"], "--json")
    shown = orjson.loads(out)
    assert shown["run"]["status"] == "failed" and shown["run"]["error"]["message"] == "it <broke>" and shown["steps"] == []
    assert cli("runs", "show", "run_missing") == (1, "", "no run run_missing\n")


def test_runs_cancel_and_retry_act_and_refuse_with_exit_1(cli, runs, client):
    assert cli("runs", "cancel", runs["queued"], "--reason", "not needed") == (0, f"{runs['queued']}: canceled\n", "")
    assert client.get_run(runs["queued"]).cancel_reason == "not needed"
    code, out, _ = cli("runs", "cancel", runs["ok"])
    assert code == 1 and out == f"{runs['ok']}: not canceled: the run already ended (succeeded)\n"

    code, out, _ = cli("runs", "retry", runs["failed"], "--json")
    assert code == 0 and orjson.loads(out)["ok"] is True
    again = wait_until(lambda: (run := client.get_run(runs["failed"])).status == "failed" and run.attempt == 2 and run, timeout=10)
    assert again.error["message"] == "it <broke>"  # the worker ran it once more
    code, out, _ = cli("runs", "retry", runs["ok"])
    assert code == 1 and "not retried: the run is succeeded" in out
    assert cli("runs", "cancel", "run_missing")[:2] == (1, "run_missing: no run run_missing\n")


def test_runs_retry_goes_on_counting_attempts_with_max_attempts_more(cli, start, registry, client):
    """What docs/operations/worker.md says `runs retry` does (3/3 runs again as 4/6), with 2 attempts to keep the backoffs short."""
    seen = []

    @define_workflow("twice", registry=registry, max_attempts=2)
    def twice(ctx):
        seen.append((ctx.run.attempt, ctx.run.max_attempts))
        raise RuntimeError("down")

    start()
    handle = client.run("twice")
    with pytest.raises(Exception, match="down"):
        handle.result(20)
    assert seen == [(1, 2), (2, 2)]
    assert cli("runs", "retry", handle.id)[0] == 0
    wait_until(lambda: (run := client.get_run(handle.id)).status == "failed" and run.attempt == 4, timeout=30)
    assert seen[2:] == [(3, 4), (4, 4)]


def test_queues_counts_ready_processing_and_scheduled(cli, registry, client, r):
    @define_workflow("q1", registry=registry, queue="alpha")
    def q1(ctx):
        return None

    client.sync_registry(registry)
    for _ in range(3):
        client.run("q1")
    client.run("q1", delay=3600)
    r.lmove(client.keys.queue_ready("alpha"), client.keys.queue_processing("alpha"), "RIGHT", "LEFT")  # as a worker's claim
    code, out, _ = cli("queues")
    assert code == 0 and [line.split() for line in out.splitlines()] == [
        ["QUEUE", "READY", "PRIORITIZED", "PROCESSING", "SCHEDULED"],
        ["alpha", "2", "0", "1", "1"],
    ]
    code, out, _ = cli("queues", "--json")
    assert orjson.loads(out) == [{"queue": "alpha", "ready": 2, "processing": 1, "scheduled": 1, "prioritized": 0, "workflows": []}]


def test_cron_list_shows_next_times_and_flags_a_broken_definition(cli, registry, client, r):
    @define_workflow("nightly", registry=registry, cron=[{"expression": "0 3 * * *", "timezone": "Europe/Paris", "input": {"n": 1}}])
    def nightly(ctx):
        return None

    client.sync_registry(registry)
    code, out, _ = cli("cron", "list", "--json")
    (entry,) = orjson.loads(out)
    assert entry["workflow"] == "nightly" and entry["expression"] == "0 3 * * *" and entry["input"] == {"n": 1}
    assert entry["next_at"] > 0 and entry["timezone"] == "Europe/Paris" and entry["error"] is None

    r.hset(client.keys.cron_def(), "cron_broken", "{not json")
    code, out, _ = cli("cron", "list")
    rows = out.splitlines()
    assert code == 0 and rows[1].split()[:5] == [entry["id"], "nightly", "default", "0", "3"]
    assert rows[2].startswith("cron_broken") and "not valid JSON" in rows[2]


def test_bad_options_unreachable_redis_and_bad_urls_are_clear_errors(capsys):
    refusals = {
        ("runs", "list", "--status", "lost"): "invalid choice: 'lost'",
        ("runs", "list", "--limit", "0"): "must be >= 1, got 0",
        ("runs", "list", "--limit", "many"): "not an integer: 'many'",
        ("runs", "show"): "the following arguments are required: run_id",
    }
    for argv, message in refusals.items():
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(argv)
        assert exited.value.code == 2 and message in capsys.readouterr().err

    dead = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    args = build_parser().parse_args(["queues", "--redis-url", dead])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: Redis at redis://***@127.0.0.1:{dead.rsplit(':', 1)[1]}") and "s3cret" not in err
    args = build_parser().parse_args(["queues", "--redis-url", "nope://x"])
    assert args.func(args) == 2 and "error: bad Redis URL nope://x" in capsys.readouterr().err


def test_the_command_reads_redis_url_and_prefix_from_the_environment(redis_url, prefix, runs):
    env = {"REDIS_URL": redis_url, "REDFLOW_PREFIX": prefix, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([CLI, "runs", "list", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert {r["id"] for r in orjson.loads(done.stdout)["runs"]} == set(runs.values())


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:1/0?password=s3cret", "redis://127.0.0.1:1/0?password=***"),
        ("redis://:s3cret@127.0.0.1:1/0", "redis://***@127.0.0.1:1/0"),
        ("redis://bob:s3cret@127.0.0.1:1/0", "redis://bob:***@127.0.0.1:1/0"),
        ("redis://s3cret@127.0.0.1:1/0", "redis://***@127.0.0.1:1/0"),
        (
            "redis+sentinel://u:s3cret@h:1,h:2/svc?sentinel_password=s3cret&db=2",
            "redis+sentinel://u:***@h:1,h:2/svc?sentinel_password=***&db=2",
        ),
        ("unix:///tmp/r.sock?db=1&password=s3cret", "unix:///tmp/r.sock?db=1&password=***"),
        ("redis://127.0.0.1:1/0", "redis://127.0.0.1:1/0"),
    ],
)
def test_every_form_of_a_password_in_a_url_is_hidden(url, shown):
    from redflow.store.connection import redacted_url

    assert redacted_url(url) == shown


@pytest.mark.parametrize("form", ["redis://127.0.0.1:{port}/0?password=s3cret", "redis://:s3cret@127.0.0.1:{port}/0"])
def test_an_admin_command_against_a_refusing_redis_hides_the_password(form, capsys):
    from redflow.ops.cli import build_parser
    from redflow.testing import RedisServer

    with RedisServer(extra_args=["--requirepass", "another-password"]) as server:
        args = build_parser().parse_args(["queues", "--redis-url", form.format(port=server.port)])
        assert args.func(args) == 2  # a wrong password: refused
    err = capsys.readouterr().err
    assert err.startswith("error: Redis at ") and "s3cret" not in err and "***" in err


def test_the_bench_worker_gets_the_url_through_its_environment_not_its_command_line():
    from redflow.bench.probe import Probe
    from redflow.bench.worker import SubprocessWorker

    worker = SubprocessWorker("redis://:s3cret@127.0.0.1:1/0", "p", 10, Probe.__new__(Probe))
    try:
        assert not any("s3cret" in arg for arg in worker.command())
        assert worker.environment()["REDIS_URL"] == "redis://:s3cret@127.0.0.1:1/0"
    finally:
        os.unlink(worker._log.name)


def test_queues_does_not_count_the_priority_marker_as_a_ready_run(cli, registry, client, r):
    @define_workflow("q2", registry=registry, queue="beta")
    def q2(ctx):
        return None

    client.sync_registry(registry)
    client.run("q2")
    for _ in range(2):
        client.run("q2", priority=5)
    ready_key = client.keys.queue_ready("beta")
    assert r.llen(ready_key) == 2  # one run and the one marker standing for both prioritized runs
    r.rpush(ready_key, PRIORITY_MARKER)  # a leftover marker (its runs were canceled), as claims meet and drop them
    code, out, _ = cli("queues", "--json")
    (beta,) = orjson.loads(out)
    assert code == 0 and (beta["ready"], beta["prioritized"], beta["processing"]) == (1, 2, 0)
    r.rpush(client.keys.queue_processing("beta"), *[f"run_{i}" for i in range(1500)])  # a big fleet's runs in flight
    r.lmove(ready_key, client.keys.queue_processing("beta"), "RIGHT", "LEFT")  # a worker's BLMOVE took a marker
    (beta,) = orjson.loads(cli("queues", "--json")[1])
    assert (beta["ready"], beta["prioritized"], beta["processing"]) == (1, 2, 1500)
