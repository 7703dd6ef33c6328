"""Retry policies and deadlines in the inline test runner (redflow.testing), on its virtual clock.

A retry's wait and a step's wait between tries are fast-forwarded like a
sleep (the clock jumps by them); a delayed run starts when ``advance()``
reaches its due time, past its ``start_within`` it fails unstarted; a
``timeout`` is checked at each step, retry and wait, and a parked run fails
when the clock passes its deadline, its unfinished children canceled.
"""

from __future__ import annotations

import pytest

from redflow import DeadlineExceededError, RetryAfterError, RetryPolicy, define_workflow
from redflow.testing import InlineRunner, run_inline


class Flaky(Exception):
    pass


def test_retry_waits_are_the_policys_and_move_the_virtual_clock(registry):
    @define_workflow("sync", registry=registry, retry=RetryPolicy(max_attempts=4, initial_delay=10.0, factor=3.0, max_delay=60.0))
    def sync(ctx):
        if ctx.run.attempt < 4:
            raise Flaky("down")
        return ctx.run.attempt

    runner = InlineRunner(registry)
    before = runner.now_ms()
    run = runner.run(sync)
    assert (run.result(), run.retry_delays_ms) == (4, [10_000, 30_000, 60_000])
    assert runner.now_ms() - before >= 100_000  # 100 s passed on the runner's clock, none on the wall's


def test_retry_after_no_retry_on_and_the_default_backoff_inline(registry):
    @define_workflow("polite", registry=registry, retry=RetryPolicy(no_retry_on=(KeyError,)))
    def polite(ctx):
        if ctx.input == "key":
            raise KeyError("gone")
        if ctx.run.attempt == 1:
            raise RetryAfterError(90)
        return "ok"

    @define_workflow("default", registry=registry)
    def default(ctx):
        if ctx.run.attempt < 3:
            raise Flaky("down")
        return "ok"

    runner = InlineRunner(registry)
    assert runner.run(polite, "go").retry_delays_ms == [90_000]
    keyed = runner.run(polite, "key")
    assert (keyed.status, keyed.attempt, keyed.retry_delays_ms) == ("failed", 1, [])
    waits = runner.run(default).retry_delays_ms
    assert 250 <= waits[0] <= 349 and 500 <= waits[1] <= 599  # DATA_MODEL.md's backoff


def test_a_step_retry_inline_fast_forwards_its_waits_and_records_the_tries(registry):
    tries = []

    @define_workflow("charge", registry=registry, max_attempts=1)
    def charge(ctx):
        def gateway():
            tries.append(1)
            if len(tries) < 3:
                raise Flaky("busy")
            return "paid"

        return ctx.step.run("gateway", gateway, retry=RetryPolicy(max_attempts=3, initial_delay=30.0, max_delay=60.0))

    runner = InlineRunner(registry)
    before = runner.now_ms()
    run = runner.run(charge)
    assert run.result() == "paid" and [s.tries for s in run.steps] == [3]
    assert runner.now_ms() - before >= 90_000  # 30 s + 60 s


def test_a_delayed_run_starts_on_advance_and_fails_unstarted_past_its_start_within(registry):
    calls, failures = [], []

    @define_workflow("digest", registry=registry, start_within=5.0, on_failure=lambda ctx: failures.append(ctx.error))
    def digest(ctx):
        calls.append(ctx.input)
        return ctx.input

    runner = InlineRunner(registry)
    on_time, late = runner.run(digest, "on time", delay=10), runner.run(digest, "late", delay=1)
    assert (on_time.status, late.status) == ("scheduled", "scheduled")
    runner.advance(3)  # "late" is due at 1 s and may start until 6 s: it starts now, at 3 s
    runner.advance(5)
    assert late.result() == "late" and on_time.status == "scheduled"
    runner.advance(20)  # "on time" was due at 10 s, to start by 15 s: the clock passed 28 s with no start
    assert on_time.status == "failed" and on_time.attempt == 0 and calls == ["late"]
    with pytest.raises(DeadlineExceededError, match="start_within"):
        on_time.result()
    assert [type(e).__name__ for e in failures] == ["DeadlineExceededError"]


def test_a_timeout_ends_retries_sleeps_and_event_waits_at_the_deadline_and_cancels_children(registry):
    @define_workflow("retrier", registry=registry, timeout=60.0, retry=RetryPolicy(max_attempts=10, initial_delay=40.0, max_delay=40.0))
    def retrier(ctx):
        raise Flaky("down")

    @define_workflow("napper", registry=registry, timeout=60.0)
    def napper(ctx):
        ctx.step.sleep("nap", 3600)

    @define_workflow("kid", registry=registry)
    def kid(ctx):
        ctx.step.wait_for_event("go", "kids.go")

    @define_workflow("parent", registry=registry, timeout=60.0)
    def parent(ctx):
        return ctx.step.run_workflows("kids", kid, [1, 2])

    runner = InlineRunner(registry)
    retried = runner.run(retrier)  # attempt 1 at 0 s, 2 at 40 s; a third at 80 s would be past 60 s
    assert (retried.status, retried.attempt, retried.retry_delays_ms) == ("failed", 2, [40_000])
    assert isinstance(retried.error, DeadlineExceededError) and isinstance(retried.error.__cause__, Flaky)

    start = runner.now_ms()
    slept = runner.run(napper)  # the hour's sleep is cut at the deadline
    assert slept.status == "failed" and isinstance(slept.error, DeadlineExceededError)
    assert 60_000 <= runner.now_ms() - start < 3_600_000

    waiting = runner.run(parent)
    assert waiting.status == "scheduled" and [k.status for k in waiting.children] == ["scheduled", "scheduled"]
    runner.advance(30)
    assert waiting.status == "scheduled"
    runner.advance(31)
    assert waiting.status == "failed" and waiting.error.deadline == "timeout"
    assert [(k.status, str(k.error)) for k in waiting.children] == [("canceled", "parent run exceeded its deadline")] * 2
    assert runner.emit_event("kids.go", {}) == [] and [k.status for k in waiting.children] == ["canceled", "canceled"]


def test_a_timeout_is_checked_at_each_step_inline(registry):
    @define_workflow("slow-steps", registry=registry, timeout=10.0)
    def slow_steps(ctx):
        ctx.step.run("first", lambda: runner.skip_ms(11_000))  # the step takes 11 s on the runner's clock
        ctx.step.run("second", lambda: "never")

    runner = InlineRunner(registry)
    run = runner.run(slow_steps)
    assert run.status == "failed" and isinstance(run.error, DeadlineExceededError)
    assert [s.name for s in run.steps] == ["first"]


def test_run_inline_raises_the_deadline_error(registry):
    @define_workflow("instant-timeout", registry=registry, timeout=1.0, retry=RetryPolicy(max_attempts=2, initial_delay=5.0))
    def instant_timeout(ctx):
        raise Flaky("down")

    with pytest.raises(DeadlineExceededError, match="would start after its deadline"):
        run_inline(instant_timeout)


def test_a_run_a_handler_starts_with_a_delay_waits_for_the_clock_inline(registry):
    @define_workflow("reminder", registry=registry)
    def reminder(ctx):
        return f"remind {ctx.input}"

    @define_workflow("signup", registry=registry)
    def signup(ctx):
        later = ctx.client.run("reminder", "ada", delay=3600)
        soon = ctx.client.run("reminder", "bob", run_at=runner.now_ms() / 1000 + 60)
        return [later.id, soon.id]

    runner = InlineRunner(registry)
    later, soon = (runner.runs[run_id] for run_id in runner.run(signup).result())
    assert (later.status, soon.status) == ("scheduled", "scheduled")
    runner.advance(61)
    assert (later.status, soon.result()) == ("scheduled", "remind bob")
    runner.advance(3600)
    assert later.result() == "remind ada"
