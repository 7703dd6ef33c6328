"""Options go before or after the command: `worker -A app --log-format json`
and `--redis-url URL queues` both work, and the old placements still do."""

import argparse
import subprocess

import orjson
import pytest
from doc_pages import page_text
from helpers import CLI, ROOT, WorkerProcess

from redflow import Registry, define_workflow
from redflow.ops.cli import build_parser, parse_args

COMMANDS = (["worker", "-A", "app"], ["queues"], ["runs", "list"], ["runs", "show", "run_1"], ["cron", "list"], ["dashboard"], ["bench"])


@pytest.mark.parametrize("command", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_logging_options_are_accepted_before_or_after_every_command(command):
    after = parse_args([*command, "--log-level", "debug", "--log-format", "json"])
    before = parse_args(["--log-level", "debug", "--log-format", "json", *command])
    neither = parse_args(command)
    assert (after.log_level, after.log_format) == (before.log_level, before.log_format) == ("debug", "json")
    assert (neither.log_level, neither.log_format) == ("info", "text")
    both = parse_args(["--log-level", "error", *command, "--log-level", "warning"])
    assert both.log_level == "warning"  # the one nearer the command's own options wins


@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] != "bench"], ids=lambda argv: " ".join(argv[:2]))
def test_redis_url_and_prefix_are_accepted_before_or_after_the_commands_that_take_them(command):
    url = "redis://127.0.0.1:6390/0"
    before = parse_args(["--redis-url", url, "--prefix", "app:v1", *command])
    after = parse_args([*command, "--redis-url", url, "--prefix", "app:v1"])
    assert (before.redis_url, before.prefix) == (after.redis_url, after.prefix) == (url, "app:v1")
    assert not hasattr(before, "early_redis_url")
    both = parse_args(["--prefix", "old", *command, "--prefix", "new"])
    assert both.prefix == "new"


def test_a_connection_option_before_a_command_that_has_none_is_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(["--prefix", "app:v1", "bench"])
    assert exited.value.code == 2 and "the bench command takes no --prefix" in capsys.readouterr().err
    assert parse_args(["--redis-url", "redis://127.0.0.1:6390/0", "bench"]).redis_url == "redis://127.0.0.1:6390/0"


def test_help_says_options_go_before_or_after_the_command():
    top = build_parser().format_help()
    assert "options go before or after the command" in top and "--start-timeout" not in top
    worker_help = subprocess.run([CLI, "worker", "--help"], capture_output=True, text=True, timeout=60).stdout
    for text in ("--log-format", "before or after the command", "default 10", "(default 5000)", "(default: keep trying)"):
        assert text in worker_help


def test_an_admin_command_with_its_connection_options_first_runs(redis_url, prefix):
    """`redflow-gevent --redis-url URL queues` used to fail with 'unrecognized arguments'."""
    argv = [CLI, "--redis-url", redis_url, "--prefix", prefix, "--log-level", "warning", "queues", "--json", "--log-format", "json"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == []


def test_a_worker_with_its_log_format_after_the_command_logs_json(redis_url, prefix, cli_client):
    """`redflow-gevent worker -A app --log-format json` used to fail with 'unrecognized arguments'."""
    with WorkerProcess(redis_url, prefix, "--log-format", "json", "--log-level", "info") as worker:
        assert cli_client.run("count", {"key": f"{prefix}:seen", "n": 1}).result(20) == 2
        assert worker.stop() == 0
        records = [orjson.loads(line) for line in worker.output().splitlines()]
    assert any(record["message"].startswith("worker started") for record in records)


def test_the_docs_synopsis_and_defaults_match_the_worker_command():
    readme = page_text("docs/operations/worker.md")
    synopsis = readme[readme.index("redflow-gevent worker -A myapp.workflows") :].split("```", 1)[0]
    worker = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["worker"]
    actions = [a for a in worker._actions if a.option_strings and a.dest != "help"]
    assert [a.option_strings for a in actions if not any(f"{o} " in synopsis or f"[{o}]" in synopsis for o in a.option_strings)] == []
    options = {a.option_strings[-1]: a.default for a in actions}
    assert options["--concurrency"] == 10 and "| `-c` / `--concurrency` | 10 slots" in readme and "[-c 10]" in synopsis
    assert options["--lease-ms"] == 5000 and "| `--lease-ms` | 5000" in readme and "[--lease-ms 5000]" in synopsis
    assert options["--grace"] == 30 and "| `--grace` | 30 s" in readme and "[--grace 30]" in synopsis
    assert options["--start-timeout"] is None and "| `--start-timeout` | none" in readme
    assert define_workflow("readme-defaults", registry=Registry())(lambda ctx: None).max_attempts == 3
    assert "| `max_attempts` (of `define_workflow`) | 3 |" in readme
