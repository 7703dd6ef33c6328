"""Options go before or after the command: `worker -A app --log-format json`
and `--redis-url URL queues` both work, and the old placements still do."""

import subprocess

import orjson
import pytest
from helpers import CLI, ROOT, WorkerProcess

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
