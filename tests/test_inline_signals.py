"""Signals and emit_workflow in the inline runner (no worker, no Redis): ``InlineRunner.signal``
is ``client.signal`` for inline runs, buffered per run and name as on Redis, and the same
workflows give the same steps as on a worker (tests/test_signals.py, tests/test_emit_workflow.py)."""

import pytest

from redflow import InputValidationError, RedflowError, SignalBufferFullError, define_workflow
from redflow.core.signals import MAX_WAITING_PER_NAME
from redflow.testing import InlineRunner


def steps_of(run):
    return [(s.name, s.status, s.output) for s in run.steps]


def _approver(registry, waits=2, timeout=None):
    @define_workflow("approver", registry=registry)
    def approver(ctx):
        ctx.progress("asked")
        return [ctx.step.wait_for_signal("approve", timeout=timeout) for _ in range(waits)]

    return approver


def test_a_run_parks_until_its_signal_and_takes_one_per_wait_in_the_order_sent(registry):
    runner = InlineRunner(registry)
    run = runner.run(_approver(registry))
    assert (run.status, run.parked.reason, run.parked.step) == ("scheduled", "signal", "signal:approve")
    with pytest.raises(RedflowError, match="use InlineRunner.emit_event, signal or advance to resume it"):
        run.result()
    assert runner.signal(run.id, "other", "not this one") is True
    assert run.status == "scheduled"
    assert runner.signal(run.id, "approve", {"n": 1}) is True
    assert (run.status, run.parked.step) == ("scheduled", "signal:approve#2")
    assert runner.signal(run.id, "approve", {"n": 2}) is True
    assert run.result() == [{"n": 1}, {"n": 2}] and run.attempt == 1
    assert steps_of(run) == [("signal:approve", "succeeded", {"n": 1}), ("signal:approve#2", "succeeded", {"n": 2})]
    assert runner.signals.waiting(run.id) == {"other": ['"not this one"']}


def test_signals_sent_before_the_wait_are_kept_and_a_finished_or_unknown_run_takes_none(registry):
    @define_workflow("two-keys", registry=registry)
    def two_keys(ctx):
        return [ctx.step.wait_for_signal("first"), ctx.step.wait_for_signal("second")]

    @define_workflow("asks", registry=registry)
    def asks(ctx):
        return ctx.step.emit_workflow("two-keys", "two-keys", None)

    runner = InlineRunner(registry)
    child_id = runner.run(asks).result()  # the emitted run ran at once and parked in its first wait
    child = runner.runs[child_id]
    assert child.parked.step == "signal:first" and child.parent_id is not None
    assert runner.signal(child_id, "second", "early") and runner.signal(child_id, "second", "kept")
    assert child.status == "scheduled" and child.parked.step == "signal:first"
    assert runner.signal(child_id, "first", "now")
    assert child.result() == ["now", "early"] and runner.signals.waiting(child_id) == {"second": ['"kept"']}
    assert runner.signal(child_id, "second", "too late") is False and runner.signal("run_missing", "first", 1) is False
    assert runner.signals.waiting(child_id) == {"second": ['"kept"']}


def test_a_wait_times_out_when_the_clock_moves_past_it(registry):
    runner = InlineRunner(registry)
    run = runner.run(_approver(registry, waits=1, timeout=60))
    runner.advance(30)
    assert run.status == "scheduled"
    runner.advance(31)
    assert run.result() == [None]


def test_bad_signals_and_a_full_buffer_are_refused_as_on_redis(registry):
    runner = InlineRunner(registry)
    run = runner.run(_approver(registry, waits=1))
    with pytest.raises(RedflowError, match="a signal needs a non-empty name"):
        runner.signal(run.id, "", 1)
    with pytest.raises(InputValidationError, match="payload of signal 'approve' is not JSON-serializable"):
        runner.signal(run.id, "approve", object())
    for n in range(MAX_WAITING_PER_NAME):
        runner.signal(run.id, "later", n)
    with pytest.raises(SignalBufferFullError):
        runner.signal(run.id, "later", "one too many")
    assert len(runner.signals.waiting(run.id)["later"]) == MAX_WAITING_PER_NAME
    assert run.status == "scheduled"


def test_emit_workflow_is_memoized_across_a_retry_inline(registry):
    @define_workflow("leaf", registry=registry)
    def leaf(ctx):
        return ctx.input * 2

    @define_workflow("parent", registry=registry, max_attempts=2)
    def parent(ctx):
        child = ctx.step.emit_workflow("leaf", "leaf", 21)
        if ctx.run.attempt == 1:
            raise ConnectionError("the first attempt fails after the emit")
        return child

    runner = InlineRunner(registry)
    run = runner.run(parent)
    child_id = run.result()
    assert [r.id for r in runner.runs.values() if r.workflow == "leaf"] == [child_id]
    assert runner.runs[child_id].result() == 42 and run.children == [runner.runs[child_id]]


def test_bad_wait_arguments_fail_the_run_at_the_call(registry):
    @define_workflow("bad-waits", registry=registry, max_attempts=1)
    def bad_waits(ctx):
        kind = ctx.input
        if kind == "name":
            ctx.step.wait_for_signal("")
        elif kind == "timeout":
            ctx.step.wait_for_signal("approve", timeout=-1)
        elif kind == "inside":
            ctx.step.run("outer", lambda: ctx.step.wait_for_signal("approve"))
        elif kind == "step":
            ctx.step.run("signal:approve", lambda: 1)
            ctx.step.wait_for_signal("approve")

    runner = InlineRunner(registry)
    expected = {
        "name": "a signal needs a non-empty name",
        "timeout": "wait_for_signal timeout needs seconds >= 0",
        "inside": "a durable wait cannot run inside another step",
        "step": "Duplicate step name 'signal:approve'",
    }
    for kind, message in expected.items():
        run = runner.run(bad_waits, kind)
        with pytest.raises(RedflowError, match=message):
            run.result()


def test_a_wait_named_by_step_keeps_its_record_under_that_name(registry):
    @define_workflow("named", registry=registry)
    def named(ctx):
        return ctx.step.wait_for_signal("approve", step="manager-approval")

    runner = InlineRunner(registry)
    run = runner.run(named)
    runner.signal(run.id, "approve", "yes")
    assert run.result() == "yes" and steps_of(run) == [("manager-approval", "succeeded", "yes")]
