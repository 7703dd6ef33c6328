"""run_inline (no worker, no Redis) keeps the worker's step rules; the pytest plugin works in a user's suite."""

import subprocess
import sys
import time

import gevent
import pytest
from helpers import ROOT

from redflow import (
    CanceledError,
    InputValidationError,
    OutputSerializationError,
    RedflowError,
    RunFailedError,
    TimeoutError,
    UnknownWorkflowError,
    define_workflow,
)
from redflow.testing import InlineRunner, run_inline


def steps_of(steps):
    return [(s.name, s.status, s.seq, s.output) for s in steps]


def test_a_workflow_its_child_and_its_event_subscribers_run_inline(registry):
    @define_workflow("order", registry=registry)
    def order(ctx):
        item = ctx.step.run("reserve", lambda: {"sku": ctx.input["sku"], "qty": 2})
        invoice = ctx.step.run_workflow("invoice", "invoice", item)
        ctx.step.emit_event("notify", "order.placed", {"sku": item["sku"]})
        ctx.step.schedule_event("remind", "order.reminder", {"sku": item["sku"]}, at=time.time() + 3600)
        return {"invoice": invoice, "attempt": ctx.run.attempt}

    @define_workflow("invoice", registry=registry)
    def invoice(ctx):
        return ctx.step.run("total", lambda: ctx.input["qty"] * 5)

    seen = []

    @define_workflow("audit", registry=registry, events=["order.placed", "order.reminder"])
    def audit(ctx):
        seen.append(ctx.input)
        return "logged"

    assert run_inline(order, {"sku": "mug"}) == {"invoice": 10, "attempt": 1}
    assert seen == [{"sku": "mug"}]  # the scheduled reminder does not run now

    runner = InlineRunner(registry)
    run = runner.run("order", {"sku": "cup"})
    placed, reminder = (runner.runs[event.run_ids[0]] for event in run.events)
    assert steps_of(run.steps) == [
        ("reserve", "succeeded", 1, {"sku": "cup", "qty": 2}), ("invoice", "succeeded", 2, 10),
        ("notify", "succeeded", 3, [placed.id]), ("remind", "succeeded", 4, [reminder.id]),
    ]  # fmt: skip
    (invoice_run,) = run.children  # event runs have no parent, as with Redis
    assert (invoice_run.workflow, invoice_run.status, steps_of(invoice_run.steps)) == (
        "invoice",
        "succeeded",
        [("total", "succeeded", 1, 10)],
    )
    assert (placed.workflow, placed.status, placed.output, reminder.status) == ("audit", "succeeded", "logged", "scheduled")
    assert [(e.name, e.at is None) for e in run.events] == [("order.placed", True), ("order.reminder", False)]
    assert all(r.id.startswith("run_") for r in runner.runs.values()) and len(runner.runs) == 4


def test_step_rules_are_the_workers(registry):
    @define_workflow("twice", registry=registry)
    def twice(ctx):
        ctx.step.run("same", lambda: 1)
        ctx.step.run("same", lambda: 2)

    @define_workflow("not-json", registry=registry)
    def not_json(ctx):
        ctx.step.run("obj", lambda: object())

    @define_workflow("bad-output", registry=registry)
    def bad_output(ctx):
        return {1, 2}

    @define_workflow("too-slow", registry=registry, max_attempts=1)
    def too_slow(ctx):
        ctx.step.run("nap", lambda: gevent.sleep(5), timeout=0.05)

    with pytest.raises(RedflowError, match="Duplicate step name 'same'"):
        run_inline(twice)
    runner = InlineRunner(registry)
    with pytest.raises(OutputSerializationError, match="Step output is not JSON-serializable: obj"):
        runner.run(not_json).result()
    assert [r.attempt for r in runner.runs.values()] == [1]  # not retried although max_attempts is 3
    with pytest.raises(OutputSerializationError, match="Workflow output is not JSON-serializable"):
        run_inline(bad_output)
    began = time.monotonic()
    with pytest.raises(TimeoutError, match="Step timed out: nap"):
        run_inline(too_slow)
    assert time.monotonic() - began < 4  # the timeout cut the step short


def test_a_retryable_failure_replays_succeeded_steps_and_keeps_their_seq(registry):
    calls = []

    @define_workflow("flaky", registry=registry, max_attempts=3)
    def flaky(ctx):
        first = ctx.step.run("first", lambda: calls.append("first") or len(calls))
        ctx.step.run("second", lambda: calls.append(f"second@{ctx.run.attempt}") or (1 / (ctx.run.attempt - 1)))
        return first

    run = InlineRunner(registry).run(flaky)
    assert run.result() == 1 and run.attempt == 2
    assert calls == ["first", "second@1", "second@2"]  # "first" replayed from its stored output
    assert [(s.name, s.status, s.seq) for s in run.steps] == [("first", "succeeded", 1), ("second", "succeeded", 2)]


def test_failures_end_the_run_as_on_a_worker(registry):
    failures = []

    @define_workflow("doomed", registry=registry, max_attempts=2, on_failure=lambda ctx: failures.append((ctx.run.attempt, str(ctx.error))))
    def doomed(ctx):
        raise ValueError(f"attempt {ctx.run.attempt}")

    @define_workflow("parent", registry=registry, max_attempts=1)
    def parent(ctx):
        ctx.step.run_workflow("child", "doomed", {})

    @define_workflow("quits", registry=registry)
    def quits(ctx):
        raise CanceledError("stopped by the handler")

    @define_workflow("picky", registry=registry, schema=lambda v: v if isinstance(v, int) else int("x"))
    def picky(ctx):
        return ctx.input

    @define_workflow("raw", registry=registry)
    def raw(ctx):
        return ctx.input

    with pytest.raises(ValueError, match="attempt 2"):
        run_inline(doomed)
    assert failures == [(2, "attempt 2")]  # on_failure once, after the last attempt
    with pytest.raises(RunFailedError, match="ValueError: attempt 2"):
        run_inline(parent)  # a failed child raises RunFailedError in the parent
    runner = InlineRunner(registry)
    assert runner.run(quits).status == "canceled"
    with pytest.raises(CanceledError):
        runner.run(quits).result()
    with pytest.raises(InputValidationError):
        run_inline(picky, "nope")
    with pytest.raises(InputValidationError, match="not JSON-serializable"):
        run_inline(raw, {1, 2})
    with pytest.raises(UnknownWorkflowError):
        run_inline("nowhere", registry=registry)
    with pytest.raises(RedflowError, match="max_attempts must be an int >= 1"):
        run_inline(doomed, max_attempts=0)

    @define_workflow("bad-events", registry=registry, max_attempts=1)
    def bad_events(ctx):
        if ctx.input == "no-time":
            ctx.step.schedule_event("later", "e", {}, at=None)
        ctx.step.emit_event("now", "", {})

    with pytest.raises(RedflowError, match="schedule_event needs at="):
        run_inline(bad_events, "no-time")
    with pytest.raises(RedflowError, match="an event needs a non-empty name"):
        run_inline(bad_events, "no-name")


def test_inline_and_worker_runs_store_the_same_steps(start, registry, client):
    @define_workflow("same", registry=registry)
    def same(ctx):
        a = ctx.step.run("a", lambda: {"n": ctx.input})
        b = ctx.step.run_workflow("b", "double", a["n"])
        return [a, b]

    @define_workflow("double", registry=registry)
    def double(ctx):
        return ctx.step.run("x2", lambda: ctx.input * 2)

    start()
    handle = client.run("same", 21)
    inline = InlineRunner(registry).run(same, 21)
    assert handle.result(10) == inline.result() == [{"n": 21}, 42]
    assert steps_of(client.get_steps(handle.id)) == steps_of(inline.steps)


class Quit(BaseException):
    """Raised by a handler: not an Exception, as KeyboardInterrupt or SystemExit."""


def test_a_handler_raising_a_base_exception_ends_failed_inline_as_on_a_worker(start, registry, client):
    """One decide() (engine/decide.py) serves both: the inline runner's own copy let a
    BaseException that is not an Exception escape, where the worker fails the run."""
    failures = []

    @define_workflow("quitter", registry=registry, max_attempts=2, on_failure=lambda ctx: failures.append(type(ctx.error)))
    def quitter(ctx):
        ctx.step.run("before", lambda: ctx.run.attempt)
        raise Quit(f"attempt {ctx.run.attempt}")

    start()
    handle = client.run("quitter")
    with pytest.raises(RunFailedError, match="Quit: attempt 2"):
        handle.result(10)
    inline = InlineRunner(registry).run(quitter)
    assert (inline.status, str(inline.error), inline.attempt) == ("failed", "attempt 2", 2)
    assert client.get_run(handle.id).attempt == 2 and failures == [Quit, Quit]
    assert steps_of(client.get_steps(handle.id)) == steps_of(inline.steps)


def test_run_inline_needs_neither_redis_nor_gevent_patching():
    code = (
        "import sys; sys.modules['redis'] = None\n"  # importing redis would fail
        "from redflow import Registry, define_workflow\n"
        "from redflow.testing import run_inline\n"
        "reg = Registry()\n"
        "@define_workflow('w', registry=reg)\n"
        "def w(ctx): return ctx.step.run('s', lambda: ctx.input + 1)\n"
        "print(run_inline(w, 41))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr


def test_the_example_user_suite_passes_with_the_plugin_fixtures():
    cmd = [
        sys.executable,
        "-m",
        "gevent.monkey",
        "--module",
        "pytest",
        "examples/test_example_user_suite.py",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout.splitlines()[-1]


def test_the_worker_fixture_says_what_to_do_without_gevent_patching():
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "examples/test_example_user_suite.py::test_a_quote_on_a_real_worker",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "start_worker needs gevent monkey patching" in done.stdout
