"""How the ``redflow-gevent`` command ends: one rule for exit statuses (0 done,
1 the answer is no, 2 it could not run as asked, 141 its reader went away),
misplaced options named as such, and no traceback when piped into ``head``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import CLI, ROOT

from redflow import define_workflow
from redflow.ops.cli import build_parser, parse_args
from redflow.ops.cli.values import EXIT_CLOSED_OUTPUT, EXIT_NO, EXIT_RULE, EXIT_USAGE

#: Runs the command (argv[1:]) with its stdout a pipe whose reader has gone (as
#: ``| head -1`` once head has its line), so that every write it makes meets
#: EPIPE; prints its exit status, then its stderr. A plain Python process waits
#: for it: no event loop of the test's shares in reaping it.
CLOSED_PIPE_RUNNER = """
import os, subprocess, sys
read_end, write_end = os.pipe()
os.close(read_end)
done = subprocess.run(sys.argv[1:], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
print(done.returncode)
print(done.stderr, end="")
"""


def run_into_closed_pipe(argv: list[str], redis_url: str, prefix: str) -> tuple[int, str]:
    """(exit status, stderr) of the command run into a pipe nobody reads."""
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix)
    done = subprocess.run([sys.executable, "-c", CLOSED_PIPE_RUNNER, CLI, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=90)  # fmt: skip
    assert done.returncode == 0, done.stderr
    status, _, err = done.stdout.partition("\n")
    return int(status), err


@pytest.mark.parametrize("argv", [["queues"], ["runs", "list", "--limit", "2000"], ["runs", "list", "--json"]], ids=" ".join)
def test_a_command_piped_into_a_reader_that_quits_ends_quietly(argv, redis_url, prefix, client, registry):
    @define_workflow("piped", registry=registry)
    def piped(ctx):
        return None

    client.run_many("piped", [{"n": n} for n in range(1500)])  # a table far bigger than a pipe's buffer
    status, err = run_into_closed_pipe(argv, redis_url, prefix)
    assert (status, err) == (EXIT_CLOSED_OUTPUT, "")  # no BrokenPipeError traceback, no "Exception ignored" at exit


@pytest.mark.parametrize(
    ("argv", "message", "fixed"),
    [
        (["-c", "500", "worker", "-A", "app"], "-c is an option of the worker command: put it after the command, as in: "
         "redflow-gevent worker -c 500 ...", ["worker", "-c", "500", "-A", "app"]),
        (["--json", "queues"], "--json is an option of the queues command", ["queues", "--json"]),
        (["--log-level", "debug", "--limit=5", "runs", "list"], "as in: redflow-gevent runs list --limit=5 ...",
         ["runs", "list", "--limit=5"]),
        (["--json", "worker"], "--json is an option of bench, cron list, ", None),
        (["--bogus", "5", "worker"], "unrecognized option --bogus before the command", None),
    ],
)  # fmt: skip
def test_an_option_placed_before_its_command_is_named_as_such(argv, message, fixed, capsys):
    """It used to read as a bad command: `-c 500 worker` -> "invalid choice: '500'"."""
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    err = capsys.readouterr().err
    assert exited.value.code == EXIT_USAGE and message in err and "invalid choice" not in err
    if fixed:
        parse_args(fixed)  # the placement the message suggests is accepted


def test_options_that_belong_before_the_command_still_parse_there():
    args = parse_args(["--log-l", "debug", "--redis-url=redis://127.0.0.1:6390/0", "--prefix", "p", "queues"])
    assert (args.log_level, args.redis_url, args.prefix) == ("debug", "redis://127.0.0.1:6390/0", "p")


BAD_VALUES = [
    ["worker", "-c", "0"],
    ["worker", "--processes", "0"],
    ["worker", "--start-timeout", "-1"],
    ["runs", "list", "--tag", "customer"],
    ["runs", "list", "--tag", "a=1", "--tag", "a=2"],
    ["runs", "retry"],
    ["runs", "retry", "--all", "--status", "succeeded"],
    ["runs", "purge", "--older-than", "soon"],
    ["stats", "--window", "fortnight"],
    ["dashboard", "--port", "99999"],
    ["dashboard", "--token", "short"],
    ["bench", "-n", "0"],
    ["bench", "--rate", "-1"],
    ["bench", "--replay"],
    ["bench", "--compare", "/nonexistent/baseline.json"],
    ["cron", "pause"],
]


@pytest.mark.parametrize("argv", BAD_VALUES, ids=" ".join)
def test_a_bad_value_exits_2_before_anything_is_done(argv, redis_url, prefix, capsys):
    connection = ["--redis-url", redis_url, "--prefix", prefix] if argv[0] not in ("worker", "bench") else []
    try:  # main() but its set-up of logging, which would outlive this test on its captured stderr
        args = parse_args([*argv, *connection])
        code = args.func(args)
    except SystemExit as exited:
        code = exited.code
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "error: " in err and "Traceback" not in err


def test_an_answer_of_no_exits_1(cli, client, registry):
    assert cli("runs", "show", "run_missing")[0] == EXIT_NO
    assert cli("cron", "pause", "cron_missing")[0] == EXIT_NO
    define_workflow("done-already", registry=registry)(lambda ctx: None)
    handle = client.run("done-already")
    client.cancel(handle.id)
    assert cli("runs", "cancel", handle.id)[0] == EXIT_NO  # it already ended


def test_the_exit_rule_is_in_the_help_and_the_cli_docs():
    assert EXIT_RULE in build_parser().format_help()
    page = " ".join((ROOT / "docs" / "operations" / "worker.md").read_text().split())
    assert " ".join(EXIT_RULE.split()) in page
