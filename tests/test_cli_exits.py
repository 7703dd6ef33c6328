"""How the ``redflow-gevent`` command ends: one rule for exit statuses (0 done,
1 the answer is no, 2 it could not run as asked, 141 its reader went away),
misplaced options named as such, and no traceback when piped into ``head``."""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import CLI, ROOT

from redflow import define_workflow

EXIT_CLOSED_OUTPUT = 141


def run_into_closed_pipe(argv: list[str], redis_url: str, prefix: str) -> subprocess.CompletedProcess:
    """Run the command with its stdout a pipe whose reader has gone (as ``| head -1``
    once head has its line): every write the command makes meets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix)
        return subprocess.run([CLI, *argv], cwd=ROOT, env=env, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [["queues"], ["runs", "list", "--limit", "2000"], ["runs", "list", "--json"]], ids=" ".join)
def test_a_command_piped_into_a_reader_that_quits_ends_quietly(argv, redis_url, prefix, client, registry):
    @define_workflow("piped", registry=registry)
    def piped(ctx):
        return None

    client.run_many("piped", [{"n": n} for n in range(1500)])  # a table far bigger than a pipe's buffer
    done = run_into_closed_pipe(argv, redis_url, prefix)
    assert done.returncode == EXIT_CLOSED_OUTPUT, done.stderr
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
