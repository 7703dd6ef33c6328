"""Deadlines (issue 30 item 2): ``start_within=`` and ``timeout=`` on real workers.

A deadline is an absolute time stored on the run, in Redis's clock, so the
tests wait on Redis's clock (``client.now_ms()``) and assert orders of stored
times (a run ends no earlier than its deadline, a parked run's wake time is
its deadline), never durations. The invariant of a timeout racing a cancel
or a dying worker: a run ends once, ``failed`` or ``canceled``: its hash and
the status indexes agree on one terminal status, which never changes after.
"""

from __future__ import annotations

import random
from datetime import timedelta

import gevent
import pytest
from gevent.event import Event
from helpers import WorkerProcess, wait_until

from redflow import DeadlineExceededError, RedflowError, RetryPolicy, RunFailedError, create_client, define_workflow
from redflow.core.keys import RUN_STATUSES
from redflow.ops.observe.metrics import MetricsObserver


def expired_error(handle, deadline):
    """The run ended failed by ``deadline``; its error record."""
    with pytest.raises(RunFailedError) as failed:
        handle.result(15)
    assert (failed.value.error["name"], failed.value.error["kind"]) == ("DeadlineExceededError", "non_retriable")
    assert handle.client.get_run(handle.id).deadline_exceeded == deadline
    return failed.value.error


def outlasting(name, registry, **options):
    """A workflow whose one step outlasts any deadline the tests give it (60 s)."""

    @define_workflow(name, registry=registry, **options)
    def handler(ctx):
        ctx.step.run("call", lambda: gevent.sleep(60))

    return handler


def wait_for_redis_time(client, at_ms):
    wait_until(lambda: client.now_ms() > at_ms, message=f"Redis's clock to pass {at_ms}")


def status_indexes(r, client, run_id):
    """The status zsets that hold the run (exactly one when the invariant holds)."""
    return [status for status in RUN_STATUSES if r.zscore(client.keys.runs_status(status), run_id) is not None]


# -- define time and enqueue -----------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1h", True, timedelta(0)])
@pytest.mark.parametrize("option", ["start_within", "timeout"])
def test_a_bad_deadline_is_a_clear_error_at_define_time(registry, option, bad):
    with pytest.raises(RedflowError, match=f"workflow 'bad': {option} must be a finite number of seconds > 0"):
        define_workflow("bad", registry=registry, **{option: bad})
    assert "bad" not in registry


def test_deadlines_are_stored_on_the_run_in_redis_time_and_a_run_without_them_pays_nothing(registry, client, r):
    @define_workflow("bounded", registry=registry, start_within=timedelta(seconds=5), timeout=60.0)
    def bounded(ctx):
        return None

    @define_workflow("plain", registry=registry)
    def plain(ctx):
        return None

    run = r.hgetall(client.keys.run(bounded.run(None, client=client, delay=10).id))
    assert int(run["startBy"]) == int(run["availableAt"]) + 5000  # due at the end of its delay
    assert int(run["deadlineAt"]) == int(run["createdAt"]) + 60_000
    assert (run["startWithinMs"], run["timeoutMs"]) == ("5000", "60000")
    now = r.hgetall(client.keys.run(bounded.run(None, client=client).id))
    assert int(now["startBy"]) == int(now["createdAt"]) + 5000
    too_late = r.hgetall(client.keys.run(bounded.run(None, client=client, delay=3600).id))
    assert too_late["availableAt"] == too_late["deadlineAt"]  # a delay past the timeout ends at the deadline
    fields = set(r.hgetall(client.keys.run(plain.run(None, client=client).id)))
    assert not fields & {"startBy", "startWithinMs", "deadlineAt", "timeoutMs", "deadlineExceeded"}


def test_a_client_enqueueing_by_name_applies_the_synced_deadlines(registry, client, r, redis_url, prefix):
    @define_workflow("synced", registry=registry, timeout=30.0)
    def synced(ctx):
        return None

    client.sync_registry(registry)
    with create_client(redis_url, prefix=prefix) as by_name:  # knows no workflow code
        run = r.hgetall(by_name.keys.run(by_name.run("synced").id))
    assert int(run["deadlineAt"]) == int(run["createdAt"]) + 30_000


# -- start_within -----------------------------------------------------------------------


def test_a_delayed_run_not_started_within_its_window_fails_without_running(start, registry, client):
    calls, failures = [], []

    @define_workflow("report", registry=registry, start_within=0.2, on_failure=lambda ctx: failures.append(ctx.error))
    def report(ctx):
        calls.append(ctx.input)

    @define_workflow("roomy-report", registry=registry, start_within=30)
    def roomy_report(ctx):
        calls.append(ctx.input)

    late = report.run("late", client=client, delay=0.1)
    on_time = roomy_report.run("on time", client=client, delay=0.3)
    wait_for_redis_time(client, client.get_run(late.id).start_by * 1000)
    start()
    error = expired_error(late, "start")
    assert "start_within" in error["message"]
    on_time.result(10)
    assert calls == ["on time"]
    assert len(failures) == 1 and isinstance(failures[0], DeadlineExceededError) and failures[0].deadline == "start"
    expired = client.get_run(late.id)
    assert (expired.attempt, expired.started_at) == (0, None)  # it never started


def test_a_run_that_waited_too_long_in_a_backlog_fails_without_starting_its_handler(start, registry, client):
    release, calls = Event(), []

    @define_workflow("blocker", registry=registry)
    def blocker(ctx):
        release.wait(30)
        return "done"

    @define_workflow("fresh", registry=registry, start_within=0.2)
    def fresh(ctx):
        calls.append(1)

    start(concurrency=1)
    held = blocker.run(None, client=client)
    wait_until(lambda: held.status() == "running")
    waiting = fresh.run(None, client=client)
    wait_for_redis_time(client, client.get_run(waiting.id).start_by * 1000)
    release.set()
    assert held.result(10) == "done"
    expired_error(waiting, "start")
    assert calls == []


def test_start_within_bounds_the_first_start_only_not_the_retries(start, registry, client):
    @define_workflow("once-late", registry=registry, start_within=1.0, retry=RetryPolicy(max_attempts=2, initial_delay=1.5))
    def once_late(ctx):
        if ctx.run.attempt == 1:
            raise ConnectionError("down")
        return ctx.run.attempt

    start()
    handle = once_late.run(None, client=client)
    assert handle.result(10) == 2
    run = client.get_run(handle.id)
    assert run.finished_at > run.start_by  # its retry started past startBy


# -- timeout ---------------------------------------------------------------------------------


def test_a_timeout_interrupts_a_running_attempt_and_fails_the_run_without_retry(start, registry, client):
    failures, signals = [], []

    @define_workflow("stuck", registry=registry, timeout=1.5, on_failure=lambda ctx: failures.append(type(ctx.error).__name__))
    def stuck(ctx):
        try:
            ctx.step.run("call", lambda: gevent.sleep(60))
        finally:
            signals.append(ctx.signal.reason)

    start()
    handle = stuck.run(None, client=client)
    expired_error(handle, "timeout")
    run = client.get_run(handle.id)
    assert (run.attempt, failures, signals) == (1, ["DeadlineExceededError"], ["deadline_exceeded"])
    assert run.finished_at >= run.deadline_at


def test_a_sleeping_run_wakes_at_its_deadline_and_fails_then(start, registry, client):
    @define_workflow("long-nap", registry=registry, timeout=1.5)
    def long_nap(ctx):
        ctx.step.sleep("nap", 3600)

    start()
    handle = long_nap.run(None, client=client)
    wait_until(lambda: client.get_run(handle.id).parked_for == "sleep", message="the run to park")
    parked = client.get_run(handle.id)
    assert parked.available_at == parked.deadline_at  # the wake time is capped at the deadline, not an hour away
    expired_error(handle, "timeout")
    run = client.get_run(handle.id)
    assert run.finished_at >= run.deadline_at and run.parked_for is None


def test_a_run_waiting_for_an_event_that_never_comes_fails_at_its_deadline(start, registry, client, r):
    @define_workflow("approval", registry=registry, timeout=1.5)
    def approval(ctx):
        return ctx.step.wait_for_event("approve", "order.approved")

    start()
    handle = approval.run(None, client=client)
    wait_until(lambda: client.get_run(handle.id).parked_for == "event", message="the run to park")
    assert client.get_run(handle.id).available_at == client.get_run(handle.id).deadline_at
    expired_error(handle, "timeout")
    assert client.emit_event("order.approved", {}) == []  # too late: nothing resumes it
    gevent.sleep(0.2)
    assert client.get_run(handle.id).status == "failed"


def test_a_run_past_its_timeout_cancels_its_unfinished_children(start, registry, client):
    @define_workflow("child", registry=registry)
    def child(ctx):
        if ctx.input == "nap":
            ctx.step.sleep("nap", 3600)
        else:
            ctx.step.run("spin", lambda: gevent.sleep(60))

    @define_workflow("parent", registry=registry, timeout=2.0)
    def parent(ctx):
        return ctx.step.run_workflows("kids", "child", ["nap", "spin"])

    start(concurrency=4)
    handle = parent.run(None, client=client)
    expired_error(handle, "timeout")
    kids = client.list_children(handle.id)
    assert len(kids) == 2
    wait_until(lambda: all(client.get_run(kid).status == "canceled" for kid in kids), message="the children to be canceled")
    assert {client.get_run(kid).cancel_reason for kid in kids} == {"parent run exceeded its deadline"}


def test_a_manual_retry_gives_a_timed_out_run_a_fresh_deadline(start, registry, client):
    retried = outlasting("retried", registry, timeout=0.4)
    start()
    handle = retried.run(None, client=client)
    expired_error(handle, "timeout")
    first = client.get_run(handle.id)
    assert client.retry(handle.id)
    again = client.get_run(handle.id)
    assert again.deadline_at > first.finished_at and again.deadline_exceeded is None
    expired_error(handle, "timeout")


# -- racing a cancel, and a dying worker ----------------------------------------------------


def test_a_timeout_racing_a_cancel_ends_each_run_once(start, registry, client, r):
    """Invariant: each run ends once, failed (its deadline) or canceled: the hash and
    exactly one status index agree, and a later cancel finds it terminal."""

    racer = outlasting("racer", registry, timeout=1.0)
    start(concurrency=20)
    handles = [racer.run(i, client=client) for i in range(20)]
    deadlines_ms = [int(client.get_run(h.id).deadline_at * 1000) for h in handles]
    rng = random.Random(30)

    def cancel_near(handle, deadline_ms):
        wait_for_redis_time(client, deadline_ms + rng.randint(-50, 250))  # the keeper stops it within a 100 ms tick
        client.cancel(handle.id, reason="race")

    gevent.joinall([gevent.spawn(cancel_near, h, d) for h, d in zip(handles, deadlines_ms)], raise_error=True)
    wait_until(lambda: all(h.status() in ("failed", "canceled") for h in handles), timeout=15)
    for handle in handles:
        run = client.get_run(handle.id)
        assert status_indexes(r, client, handle.id) == [run.status]
        # a cancel asked for as the run failed wins the settle (as in the seed), keeping the failure's error
        expected = {"DeadlineExceededError"} if run.status == "failed" else {"CanceledError", "DeadlineExceededError"}
        assert (run.error or {}).get("name") in expected
        assert client.cancel(handle.id) is False  # terminal: nothing changes it
        assert client.get_run(handle.id).finished_at == run.finished_at


@pytest.mark.slow
def test_a_worker_killed_around_the_deadline_leaves_the_run_to_end_once_failed(start, registry, client, r, redis_url, prefix):
    """The worker process dies just before or after its run's deadline (lease 1 s);
    another worker ends each run once, failed by its deadline."""
    from tests.apps.deadline_app import registry as app_registry

    bounded, ended = app_registry.get("bounded-call"), []
    for offset_ms in (-300, 0, 300):
        known = set(r.zrange(client.keys.workers(), 0, -1))
        with WorkerProcess(redis_url, prefix, app="tests.apps.deadline_app:registry", concurrency=2) as doomed:
            wait_until(lambda seen=known: set(r.zrange(client.keys.workers(), 0, -1)) - seen, timeout=30, message="the worker to be up")
            handle = client.run(bounded, None)
            wait_until(lambda run_id=handle.id: client.get_run(run_id).status == "running", timeout=15, message="the run to start")
            wait_for_redis_time(client, int(client.get_run(handle.id).deadline_at * 1000) + offset_ms)
            doomed.kill()
        ended.append(handle)
    start(app_registry)
    for handle in ended:
        expired_error(handle, "timeout")
        assert status_indexes(r, client, handle.id) == ["failed"]
        assert r.exists(client.keys.run_lease(handle.id)) in (0, 1)  # a finished run's lease is left to expire


# -- counted and shown ---------------------------------------------------------------------------


def test_expired_runs_are_counted_by_the_metrics_the_stats_and_shown_by_runs_show(start, registry, client, cli):
    metered = outlasting("metered", registry, timeout=0.4, start_within=30)
    observer = MetricsObserver()
    start(observers=[observer])
    handle = metered.run(None, client=client)
    expired_error(handle, "timeout")
    wait_until(lambda: observer.registry.get_sample_value("redflow_runs_expired_total", {"workflow": "metered", "deadline": "timeout"}))
    assert observer.registry.get_sample_value("redflow_runs_failed_total", {"workflow": "metered"}) == 1

    from redflow.ops.views.stats import workflow_stats

    (stats,) = workflow_stats(client, 3600, workflows=["metered"])
    assert (stats.counts["failed"], stats.expired) == (1, 1)
    code, out, _ = cli("runs", "show", handle.id)
    assert code == 0 and "deadline  start by" in out and "end by" in out and "(exceeded: timed out)" in out
    code, out, _ = cli("stats", "--workflow", "metered")
    assert code == 0 and "EXPIRED" in out
