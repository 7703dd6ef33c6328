"""Retry policies (issue 30 item 1): ``RetryPolicy``, ``RetryAfterError``, the
``max_attempts=`` shorthand and a step's own ``retry=``.

The rules are checked on ``decide`` (the one rule the worker and the inline
runner share), then end to end on in-process workers: the waits a worker
schedules are read back from what its settle stored (``availableAt`` minus
the time it entered ``scheduled``, both written from Redis's clock by one
script), so they are exact with ``jitter=0`` and nothing here times anything.
"""

from __future__ import annotations

from datetime import timedelta

import gevent
import pytest
from helpers import wait_until

from redflow import (
    CanceledError,
    DeadlineExceededError,
    NonRetryableError,
    RedflowError,
    RetryAfterError,
    RetryPolicy,
    RunFailedError,
    define_workflow,
)
from redflow.core import codec
from redflow.core.retry import DEFAULT_RETRY, retry_delay_ms
from redflow.engine.decide import Failed, HandlerEnd, Parked, Retrying, decide
from redflow.engine.interrupts import DEADLINE
from redflow.engine.run_info import RunInfo
from redflow.engine.waits import ParkRequest
from redflow.testing import run_inline


class Flaky(Exception):
    pass


def policy(**options):
    return RetryPolicy(**{"max_attempts": 5, "initial_delay": 1.0, "factor": 2.0, "max_delay": 5.0, "jitter": 0.0, **options})


def info(attempt=1, max_attempts=5, deadline_ms=None):
    return RunInfo("run_x", "wf", "default", attempt, max_attempts, deadline_ms=deadline_ms)


def decided(error, *, attempt=1, retry=None, max_attempts=5, deadline_ms=None, now_ms=0):
    """What decide() makes of ``error`` for a workflow with ``retry`` (decide reads nothing else of it)."""
    wf = type("Wf", (), {"retry": retry})()
    return decide(HandlerEnd(error=error), info(attempt, max_attempts, deadline_ms), wf, now_ms)


# -- the policy, at define time -------------------------------------------------------


def test_the_default_policy_is_the_one_api_md_states():
    assert DEFAULT_RETRY == RetryPolicy(max_attempts=3, initial_delay=0.25, factor=2.0, max_delay=30.0, jitter=0.0)
    assert (DEFAULT_RETRY.retry_on, DEFAULT_RETRY.no_retry_on) == (None, ())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be an int >= 1"),
        ({"max_attempts": True}, "max_attempts must be an int >= 1"),
        ({"max_attempts": 2.5}, "max_attempts must be an int >= 1"),
        ({"initial_delay": -1}, "initial_delay must be a finite number of seconds >= 0"),
        ({"initial_delay": float("nan")}, "initial_delay must be a finite number of seconds >= 0"),
        ({"max_delay": "1m"}, "max_delay must be a finite number of seconds >= 0"),
        ({"initial_delay": 10, "max_delay": 5}, r"max_delay \(5s\) must be >= initial_delay \(10s\)"),
        ({"factor": 0.5}, "factor must be a finite number >= 1"),
        ({"factor": float("inf")}, "factor must be a finite number >= 1"),
        ({"jitter": 1.5}, "jitter must be a number from 0 to 1"),
        ({"jitter": -0.1}, "jitter must be a number from 0 to 1"),
        ({"retry_on": ()}, "retry_on needs at least one exception class"),
        ({"retry_on": "ValueError"}, "retry_on must be an exception class or a tuple of them"),
        ({"retry_on": (ValueError, 3)}, "retry_on must hold exception classes only"),
        ({"no_retry_on": (int,)}, "no_retry_on must hold exception classes only"),
    ],
)
def test_a_bad_policy_is_a_clear_error_where_it_is_made(options, message):
    with pytest.raises(RedflowError, match=f"RetryPolicy {message}"):
        policy(**options)


def test_a_policy_takes_timedeltas_and_single_classes():
    made = RetryPolicy(initial_delay=timedelta(milliseconds=500), max_delay=timedelta(minutes=1), retry_on=Flaky, no_retry_on=[KeyError])
    assert (made.initial_delay, made.max_delay, made.retry_on, made.no_retry_on) == (0.5, 60.0, (Flaky,), (KeyError,))


def test_max_attempts_is_a_shorthand_and_giving_both_is_an_error(registry):
    @define_workflow("shorthand", registry=registry, max_attempts=7)
    def shorthand(ctx):
        return None

    @define_workflow("with-policy", registry=registry, retry=policy(max_attempts=9))
    def with_policy(ctx):
        return None

    assert (shorthand.max_attempts, shorthand.retry) == (7, None)
    assert (with_policy.max_attempts, with_policy.retry) == (9, policy(max_attempts=9))
    with pytest.raises(RedflowError, match="give max_attempts= or retry=RetryPolicy"):
        define_workflow("both", registry=registry, max_attempts=3, retry=policy())
    with pytest.raises(RedflowError, match="retry must be a RetryPolicy"):
        define_workflow("not-a-policy", registry=registry, retry={"max_attempts": 3})
    with pytest.raises(RedflowError, match="max_attempts must be an int >= 1"):
        define_workflow("zero", registry=registry, max_attempts=0)
    assert "both" not in registry and "not-a-policy" not in registry


def test_retry_after_error_needs_seconds_and_says_them_in_its_json():
    for bad in (-1, float("inf"), "5", None, True):
        with pytest.raises(RedflowError, match="RetryAfterError needs seconds >= 0"):
            RetryAfterError(bad)
    error = RetryAfterError(timedelta(seconds=1.5))
    stored = codec.loads(codec.dumps_error(error))
    assert (error.retry_after_ms, stored["kind"], stored["retryAfterMs"], stored["name"]) == (1500, "retry_after", 1500, "RetryAfterError")


# -- what decide() makes of an error --------------------------------------------------------


def test_the_wait_before_attempt_n_plus_1_is_capped_exponential_and_jitter_stays_in_its_band():
    exact = policy(initial_delay=0.2, factor=3.0, max_delay=2.0)
    assert [exact.backoff_ms(n) for n in range(1, 6)] == [200, 600, 1800, 2000, 2000]
    assert exact.backoff_ms(10_000) == 2000  # factor ** a huge attempt overflows a float: the cap
    spread = policy(initial_delay=1.0, factor=1.0, max_delay=1.0, jitter=0.25)
    waits = {spread.backoff_ms(1) for _ in range(300)}
    assert min(waits) >= 750 and max(waits) <= 1250 and len(waits) > 10


def test_without_a_policy_the_wait_is_data_models_backoff_with_its_0_to_99_ms():
    waits = {retry_delay_ms(Flaky(), 3, None) for _ in range(300)}
    assert min(waits) >= 1000 and max(waits) <= 1099 and len(waits) > 1
    assert decided(Flaky(), attempt=2).kind == "retried"


def test_no_retry_on_fails_at_once_and_retry_on_retries_only_its_classes():
    no_value = policy(no_retry_on=(ValueError,))
    assert isinstance(decided(ValueError("bad"), retry=no_value), Failed)
    assert decided(Flaky(), retry=no_value).delay_ms == 1000
    only_flaky = policy(retry_on=(Flaky,))
    assert isinstance(decided(KeyError("k"), retry=only_flaky), Failed)
    assert isinstance(decided(Flaky(), attempt=3, retry=only_flaky), Retrying)
    assert decided(Flaky(), attempt=3, retry=only_flaky).delay_ms == 4000
    both = policy(retry_on=(Exception,), no_retry_on=(Flaky,))
    assert isinstance(decided(Flaky(), retry=both), Failed)  # no_retry_on wins


def test_non_retryable_errors_never_retry_whatever_retry_on_says():
    class Declined(NonRetryableError):
        pass

    everything = policy(retry_on=(Exception,))
    assert isinstance(decided(Declined("card declined"), retry=everything), Failed)
    assert isinstance(decided(DeadlineExceededError(), retry=everything), Failed)


def test_retry_after_error_sets_the_wait_counts_an_attempt_and_ignores_retry_on():
    only_flaky = policy(retry_on=(Flaky,), max_delay=5.0)
    outcome = decided(RetryAfterError(3600), retry=only_flaky)
    assert isinstance(outcome, Retrying) and outcome.delay_ms == 3_600_000  # not capped by max_delay
    assert isinstance(decided(RetryAfterError(1), attempt=5, retry=only_flaky), Failed)  # no attempt left
    assert isinstance(decided(RetryAfterError(1), retry=policy(no_retry_on=(RetryAfterError,))), Failed)
    assert decided(RetryAfterError(0.5)).delay_ms == 500  # the default policy honours it too


def test_a_retry_due_at_or_past_the_deadline_fails_the_run_now_with_the_error_as_its_cause():
    error = Flaky("still down")
    outcome = decided(error, retry=policy(), deadline_ms=10_000, now_ms=9_000)
    assert isinstance(outcome, Failed) and isinstance(outcome.error, DeadlineExceededError)
    assert outcome.error.deadline == "timeout" and outcome.error.__cause__ is error and "Flaky: still down" in str(outcome.error)
    assert isinstance(decided(error, retry=policy(), deadline_ms=10_000, now_ms=8_999), Retrying)


def test_a_wait_parks_until_the_deadline_at_the_latest_and_a_stop_for_the_deadline_fails_the_run():
    request = ParkRequest("sleep", "nap", "{}", wake_at_ms=50_000)
    run = info(deadline_ms=20_000)
    capped = decide(HandlerEnd(error=_park_error(request)), run, None, 10_000)
    assert isinstance(capped, Parked) and capped.request.wake_at_ms == 20_000 and request.wake_at_ms == 50_000
    assert isinstance(decide(HandlerEnd(error=_park_error(request)), run, None, 20_000), Failed)
    assert decide(HandlerEnd(error=_park_error(request)), info(), None, 10_000) == Parked(request)
    stopped = decide(HandlerEnd(interrupted=DEADLINE, error=CanceledError()), run, None, 20_000)
    assert isinstance(stopped, Failed) and isinstance(stopped.error, DeadlineExceededError)


def _park_error(request):
    from redflow.engine.waits import ParkRun

    return ParkRun(request)


# -- on a worker ----------------------------------------------------------------------------


def stored_waits(r, client, run_id, queue="default"):
    """Watch a run until it ends; the wait each retry stored, by attempt: availableAt
    minus the time it entered ``scheduled`` (both from one settle, in Redis's clock)."""
    keys, waits = client.keys, {}
    while True:
        pipe = r.pipeline(transaction=True)
        pipe.hmget(keys.run(run_id, queue), ["status", "attempt", "availableAt"])
        pipe.zscore(keys.runs_status("scheduled", queue), run_id)
        (status, attempt, available_at), entered = pipe.execute()
        if status == "scheduled" and available_at and entered is not None:
            waits[int(attempt)] = int(available_at) - int(entered)
        if status in ("succeeded", "failed", "canceled"):
            return status, waits
        gevent.sleep(0.005)


def test_a_worker_waits_exactly_what_a_policy_without_jitter_says(start, registry, client, r):
    @define_workflow("down", registry=registry, retry=policy(max_attempts=4, initial_delay=0.3, factor=2.0, max_delay=0.7))
    def down(ctx):
        raise Flaky(f"attempt {ctx.run.attempt}")

    start()
    handle = down.run(None, client=client)
    status, waits = stored_waits(r, client, handle.id)
    assert (status, waits) == ("failed", {1: 300, 2: 600, 3: 700})
    assert client.get_run(handle.id).attempt == 4


def test_on_a_worker_retry_after_wins_and_no_retry_on_and_non_retryable_fail_at_once(start, registry, client, r):
    failures = []

    @define_workflow(
        "sync-crm",
        registry=registry,
        retry=policy(max_attempts=3, initial_delay=5.0, max_delay=5.0, retry_on=(Flaky,), no_retry_on=(ValueError,)),
        on_failure=lambda ctx: failures.append((ctx.input, type(ctx.error).__name__, ctx.run.attempt)),
    )
    def sync_crm(ctx):
        kind = ctx.input
        if kind == "later" and ctx.run.attempt == 1:
            raise RetryAfterError(0.2)
        if kind == "value":
            raise ValueError("bad account")
        if kind == "key":
            raise KeyError("not in retry_on")
        if kind == "declined":
            raise NonRetryableError("declined")
        return ctx.run.attempt

    start()
    later = sync_crm.run("later", client=client)
    status, waits = stored_waits(r, client, later.id)
    assert (status, waits, later.result(5)) == ("succeeded", {1: 200}, 2)
    for kind in ("value", "key", "declined"):
        with pytest.raises(RunFailedError):
            sync_crm.run(kind, client=client).result(10)
    assert sorted(failures) == [("declined", "NonRetryableError", 1), ("key", "KeyError", 1), ("value", "ValueError", 1)]


# -- a step's own retry policy ------------------------------------------------------------


def test_a_step_with_a_policy_is_tried_again_in_the_same_attempt_and_every_failure_is_recorded(start, registry, client, r):
    seen = []

    @define_workflow("charge", registry=registry)
    def charge(ctx):
        def call_gateway():
            seen.append(codec.try_loads(r.hget(client.keys.run_steps(ctx.run.id), "gateway")))  # as the previous try left it
            if len(seen) < 3:
                raise Flaky(f"try {len(seen)}")
            return "paid"

        return ctx.step.run("gateway", call_gateway, retry=policy(max_attempts=3, initial_delay=0.05))

    start()
    handle = charge.run(None, client=client)
    assert handle.result(10) == "paid"
    assert seen[0] is None
    assert [(s["status"], s["tries"], codec.loads(s["errorJson"])["message"]) for s in seen[1:]] == [
        ("failed", 1, "try 1"),
        ("failed", 2, "try 2"),
    ]
    (step,) = client.get_steps(handle.id)
    assert (step.status, step.tries, step.attempt, client.get_run(handle.id).attempt) == ("succeeded", 3, 1, 1)


def test_a_step_out_of_tries_hands_its_error_to_the_run_which_tries_it_afresh(start, registry, client):
    tries = []

    @define_workflow("steps-then-run", registry=registry, retry=policy(max_attempts=2, initial_delay=0.05))
    def steps_then_run(ctx):
        def once_more():
            tries.append(ctx.run.attempt)
            raise Flaky("down")

        return ctx.step.run("call", once_more, retry=policy(max_attempts=2, initial_delay=0.05, no_retry_on=(KeyError,)))

    start()
    with pytest.raises(RunFailedError):
        steps_then_run.run(None, client=client).result(10)
    assert tries == [1, 1, 2, 2]  # two tries in each of the run's two attempts


def test_a_cancel_interrupts_a_step_waiting_between_tries(start, registry, client):
    @define_workflow("patient", registry=registry)
    def patient(ctx):
        return ctx.step.run("call", _always_fails, retry=policy(max_attempts=5, initial_delay=3600.0, max_delay=3600.0))

    start()
    handle = patient.run(None, client=client)
    wait_until(lambda: [s.tries for s in client.get_steps(handle.id)] == [1], message="the first try to fail")
    client.cancel(handle.id)
    with pytest.raises(CanceledError):
        handle.result(10)


def _always_fails():
    raise Flaky("down")


def test_a_step_policy_that_is_not_a_policy_is_refused_before_the_step_runs(registry):
    calls = []

    @define_workflow("typo", registry=registry, max_attempts=1)
    def typo(ctx):
        return ctx.step.run("s", lambda: calls.append(1), retry=3)

    with pytest.raises(RedflowError, match="a step's retry must be a RetryPolicy or None"):
        run_inline(typo)
    assert calls == []
