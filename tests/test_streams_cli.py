"""``redflow-gevent runs tail RUN_ID``: a run's output stream on the terminal, live,
until the run ends; clear exits for no such run, a bad option and a timeout."""

import json
import os
import subprocess

import gevent
from gevent.event import Event
from helpers import CLI, ROOT, wait_until

from redflow import define_workflow


def test_runs_tail_prints_items_as_they_are_written_and_ends_with_the_run(start, client, registry, redis_url, prefix):
    step = Event()

    @define_workflow("chat", registry=registry)
    def chat(ctx):
        ctx.stream({"token": "Hel"})
        step.wait(30)
        ctx.stream({"token": "lo"})
        return "done"

    start()
    handle = client.run("chat", None)
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix)
    tail = subprocess.Popen([CLI, "runs", "tail", handle.id], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with gevent.Timeout(60):
            assert tail.stdout.readline() == '[1] {"token":"Hel"}\n'  # printed while the run still runs
            assert handle.status() == "running"
            step.set()
            assert tail.stdout.readline() == '[1] {"token":"lo"}\n'
            assert tail.wait() == 0
        assert tail.stdout.read() == "" and tail.stderr.read() == f"run {handle.id} ended: succeeded\n"
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()


def test_runs_tail_of_a_finished_run_prints_its_items_as_text_or_json(start, client, registry, cli):
    @define_workflow("done-talking", registry=registry, max_attempts=2)
    def done_talking(ctx):
        ctx.stream(f"try {ctx.run.attempt}")
        if ctx.run.attempt == 1:
            raise RuntimeError("again")

    start()
    handle = client.run("done-talking", None)
    handle.result(10)
    code, out, err = cli("runs", "tail", handle.id)
    assert (code, out, err) == (0, '[1] "try 1"\n[2] "try 2"\n', f"run {handle.id} ended: succeeded\n")
    code, out, _ = cli("runs", "tail", handle.id, "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    items = client.read_stream(handle.id)
    assert code == 0 and lines == [
        *({"id": item.id, "attempt": item.attempt, "at": item.written_at, "value": item.value} for item in items),
        {"run": handle.id, "status": "succeeded"},
    ]
    code, out, _ = cli("runs", "tail", handle.id, "--after", items[0].id)
    assert (code, out) == (0, '[2] "try 2"\n')


def test_runs_tail_refuses_what_makes_no_sense_and_says_when_it_times_out(start, client, registry, cli):
    go = Event()

    @define_workflow("stuck", registry=registry)
    def stuck(ctx):
        ctx.stream("waiting")
        go.wait(30)

    start()
    handle = client.run("stuck", None)
    wait_until(lambda: len(client.read_stream(handle.id)) == 1)
    code, out, err = cli("runs", "tail", "run_nope")
    assert (code, out, err) == (1, "", "error: Run not found: run_nope\n")
    code, _, err = cli("runs", "tail", handle.id, "--after", "yesterday")
    assert code == 2 and "argument --after: after= must be None or a stream item id" in err
    for timeout in ("0", "-1", "soon", "inf"):
        code, _, err = cli("runs", "tail", handle.id, "--timeout", timeout)
        assert code == 2 and "argument --timeout: timeout must be None or a number of seconds > 0" in err
    code, out, err = cli("runs", "tail", handle.id, "--timeout", "0.3")
    assert code == 1 and out == '[1] "waiting"\n' and "Timed out following the stream of run" in err
    go.set()
