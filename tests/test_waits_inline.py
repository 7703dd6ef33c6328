"""Durable waits in the inline runner (no worker, no Redis): sleeps are fast-forwarded on the
runner's clock, event waits resume on ``InlineRunner.emit_event`` (or another inline run's
event) and time out on ``InlineRunner.advance``, and ``run_workflows`` parents resume when
their last child ends. The same workflows give the same steps as on a worker."""

import time

import pytest

from redflow import RedflowError, RunFailedError, define_workflow
from redflow.testing import InlineRunner, run_inline


def steps_of(steps):
    return [(s.name, s.status, s.output) for s in steps]


def test_a_sleep_is_fast_forwarded_on_the_runners_clock(registry):
    @define_workflow("nap", registry=registry)
    def nap(ctx):
        before = ctx.step.run("before", lambda: "b")
        ctx.step.sleep("hour", 3600)
        ctx.step.sleep_until("past", time.time() - 5)
        return {"before": before, "attempt": ctx.run.attempt}

    runner = InlineRunner(registry)
    began = time.time()
    run = runner.run(nap)
    assert run.result() == {"before": "b", "attempt": 1} and time.time() - began < 60
    assert runner.now_ms() >= int(began * 1000) + 3_600_000
    assert steps_of(run.steps) == [("before", "succeeded", "b"), ("hour", "succeeded", None), ("past", "succeeded", None)]
    assert run_inline(nap) == {"before": "b", "attempt": 1}


def _approval(registry):
    @define_workflow("approval", registry=registry)
    def approval(ctx):
        ctx.progress("asked")
        got = ctx.step.wait_for_event("approval", "order.approved", match={"order": ctx.input}, timeout=60)
        ctx.progress("answered")
        return got

    return approval


def test_an_event_wait_parks_until_a_matching_event_and_resumes_once(registry):
    approval = _approval(registry)
    runner = InlineRunner(registry)
    run = runner.run(approval, 7)
    assert (run.status, run.parked.reason, run.progress) == ("scheduled", "event", "asked")
    with pytest.raises(RedflowError, match="is parked .*use InlineRunner.emit_event"):
        run.result()
    runner.emit_event("order.approved", {"order": 8})
    assert run.status == "scheduled"
    runner.emit_event("order.approved", {"order": 7, "by": "ada"})
    assert run.result() == {"order": 7, "by": "ada"} and run.attempt == 1 and run.progress == "answered"
    runner.emit_event("order.approved", {"order": 7, "by": "bob"})
    assert run.result() == {"order": 7, "by": "ada"}


def test_an_event_wait_times_out_when_the_clock_is_advanced_and_an_earlier_event_does_not_count(registry):
    approval = _approval(registry)
    runner = InlineRunner(registry)
    runner.emit_event("order.approved", {"order": 1})  # before the run waited
    run = runner.run(approval, 1)
    runner.advance(30)
    assert run.status == "scheduled"
    runner.advance(31)
    assert run.result() is None


def test_events_from_other_runs_and_scheduled_events_reach_waiters(registry):
    approval = _approval(registry)

    @define_workflow("approver", registry=registry)
    def approver(ctx):
        ctx.step.emit_event("approve", "order.approved", {"order": ctx.input})
        ctx.step.schedule_event("later", "order.approved", {"order": ctx.input + 1, "late": True}, at=time.time() + 10)

    runner = InlineRunner(registry)
    first, second = runner.run(approval, 1), runner.run(approval, 2)
    runner.run(approver, 1)
    assert first.result() == {"order": 1} and second.status == "scheduled"
    runner.advance(11)
    assert second.result() == {"order": 2, "late": True}


def _fan(registry):
    @define_workflow("leaf", registry=registry)
    def leaf(ctx):
        if ctx.input.get("fail"):
            raise ValueError(f"leaf {ctx.input['n']} refuses")
        if ctx.input.get("wait"):
            ctx.step.wait_for_event("go", "go")
        return ctx.input["n"] * 2

    @define_workflow("fan", registry=registry, max_attempts=1)
    def fan(ctx):
        return ctx.step.run_workflows("fan-out", "leaf", ctx.input)

    return fan


def test_run_workflows_returns_outputs_in_order_and_a_failed_child_fails_the_parent(registry):
    fan = _fan(registry)
    assert run_inline(fan, [{"n": n} for n in range(5)]) == [0, 2, 4, 6, 8]
    runner = InlineRunner(registry)
    run = runner.run(fan, [{"n": 0}, {"n": 1, "fail": True}, {"n": 2}])
    failed = run.children[1]
    with pytest.raises(RunFailedError, match=f"Run {failed.id} failed: ValueError: leaf 1 refuses"):
        run.result()
    assert [c.status for c in run.children] == ["succeeded", "failed", "succeeded"]


def test_a_parent_parked_for_a_waiting_child_resumes_when_it_ends(registry):
    fan = _fan(registry)
    runner = InlineRunner(registry)
    run = runner.run(fan, [{"n": 0}, {"n": 1, "wait": True}])
    assert (run.status, run.parked.reason, [c.status for c in run.children]) == ("scheduled", "children", ["succeeded", "scheduled"])
    runner.emit_event("go", None)
    assert run.result() == [0, 2] and run.attempt == 1


def test_inline_and_worker_runs_of_waits_store_the_same_steps(start, registry, client):
    @define_workflow("both", registry=registry)
    def both(ctx):
        ctx.step.sleep("nap", 0.2)
        doubled = ctx.step.run_workflows("fan", "double", [1, 2, 3])
        return ctx.step.run("sum", lambda: sum(doubled))

    @define_workflow("double", registry=registry)
    def double(ctx):
        return ctx.input * 2

    start(concurrency=2)
    on_worker = both.run(None, client=client)
    inline = InlineRunner(registry).run(both)
    assert on_worker.result(15) == inline.result() == 12
    assert steps_of(client.get_steps(on_worker.id)) == steps_of(inline.steps)
