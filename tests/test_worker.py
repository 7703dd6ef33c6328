"""The seed worker's behaviours, each against a real redis-server (issue 4, 1-7 and 11)."""

import time

import gevent
import pytest
from helpers import wait_until, write_run

from redflow import (
    CanceledError,
    NonRetryableError,
    RunFailedError,
    define_workflow,
)
from redflow.core import clock
from redflow.core.errors import RedflowError
from redflow.engine.worker import WorkerOptions


def count(r, prefix, name):
    return int(r.get(f"{prefix}:count:{name}") or 0)


def bump(r, prefix, name):
    r.incr(f"{prefix}:count:{name}")


# 1. lifecycle ------------------------------------------------------------------


def test_start_syncs_the_registry_derives_queues_and_starts_slots(start, registry, r, client):
    @define_workflow("a", queue="qa", registry=registry)
    def a(ctx):
        return "a"

    @define_workflow("b", queue="qb", registry=registry)
    def b(ctx):
        return "b"

    worker = start(concurrency=3)
    assert worker.queues == ["qa", "qb"]
    assert len(worker._slots) == 3 and worker.running
    assert r.smembers(client.keys.workflows()) == {"a", "b"}
    assert r.hget(client.keys.workflow("a"), "queue") == "qa"
    assert a.run(None, client=client).result(5) == "a"
    assert b.run(None, client=client).result(5) == "b"


def test_explicit_queues_override_the_registry(start, registry, client):
    @define_workflow("a", queue="qa", registry=registry)
    def a(ctx):
        return "a"

    worker = start(queues=["elsewhere"])
    assert worker.queues == ["elsewhere"]
    handle = a.run(None, client=client)
    gevent.sleep(0.3)
    assert handle.status() == "queued"


def test_stop_waits_for_runs_in_flight_and_closes(start, registry, client):
    @define_workflow("slow", registry=registry)
    def slow(ctx):
        gevent.sleep(0.5)
        return "done"

    worker = start()
    handle = slow.run(None, client=client)
    wait_until(lambda: handle.status() == "running")
    began = time.monotonic()
    worker.stop(timeout=5)
    assert 0.2 < time.monotonic() - began < 4
    assert handle.status() == "succeeded" and not worker.running
    assert worker.join(0) is True


def test_stop_leaves_runs_past_the_timeout_to_another_worker_which_replays_steps(start, registry, client, r, prefix):
    @define_workflow("long", registry=registry)
    def long(ctx):
        ctx.step.run("first", lambda: bump(r, prefix, "first"))
        ctx.step.run("wait", lambda: gevent.sleep(1.5 if count(r, prefix, "first") == 1 else 0))
        return "finished"

    first = start()
    handle = long.run(None, client=client)
    wait_until(lambda: count(r, prefix, "first") == 1)
    first.stop(timeout=0.2)
    state = client.get_run(handle.id)
    assert state.status == "running"  # left unfinalized, not canceled
    assert r.get(client.keys.run_lease(handle.id, "default")) is None  # released: no need to wait for expiry
    start()
    assert handle.result(10) == "finished"
    assert count(r, prefix, "first") == 1  # the finished step was replayed, not re-run


def test_context_manager_form(redis_url, prefix, registry, client):
    from redflow import start_worker

    @define_workflow("cm", registry=registry)
    def cm(ctx):
        return 1

    with start_worker(registry, url=redis_url, prefix=prefix) as worker:
        assert cm.run(None, client=client).result(5) == 1
    assert not worker.running


def test_worker_options_are_validated():
    with pytest.raises(RedflowError):
        WorkerOptions(concurrency=0)
    with pytest.raises(RedflowError):
        WorkerOptions(lease_ms=10)


# 2. claim ------------------------------------------------------------------------


def test_claim_probes_every_queue_before_blocking(start, registry, client):
    @define_workflow("busy", queue="busy", registry=registry)
    def busy(ctx):
        return "ok"

    @define_workflow("idle", queue="idle", registry=registry)
    def idle(ctx):
        return None

    handles = [busy.run(None, client=client) for _ in range(5)]
    began = time.monotonic()
    start(concurrency=1, blmove_timeout=3.0)
    assert [h.result(10) for h in handles] == ["ok"] * 5
    # every claim found "busy" by probing: none waited out a 3 s BLMOVE on "idle"
    assert time.monotonic() - began < 2.5


def test_a_claimed_run_sits_in_processing_while_it_runs(start, registry, client, r):
    @define_workflow("hold", registry=registry)
    def hold(ctx):
        gevent.sleep(0.3)

    start()
    handle = hold.run(None, client=client)
    wait_until(lambda: handle.id in r.lrange(client.keys.queue_processing("default"), 0, -1))
    assert r.llen(client.keys.queue_ready("default")) == 0
    handle.result(5)
    assert r.llen(client.keys.queue_processing("default")) == 0


# 3. lease ------------------------------------------------------------------------


def test_lease_is_taken_renewed_and_left_to_expire_when_the_run_ends(start, registry, client, r):
    @define_workflow("leased", registry=registry)
    def leased(ctx):
        gevent.sleep(1.0)

    start(lease_ms=400)
    handle = leased.run(None, client=client)
    lease_key = client.keys.run_lease(handle.id, "default")
    token = wait_until(lambda: r.get(lease_key))
    assert token.startswith("lease_")
    assert 0 < r.pttl(lease_key) <= 400
    gevent.sleep(0.7)  # past the lease time: only renewal keeps it
    assert r.get(lease_key) == token
    handle.result(5)
    # Nothing claims a finished run, so its settle saves the DEL: the lease just expires.
    assert r.get(lease_key) in (token, None) and r.pttl(lease_key) <= 400
    wait_until(lambda: r.exists(lease_key) == 0, timeout=1.0)
    assert client.retry(handle.id) is False  # succeeded: nothing to retry


def test_a_lost_lease_stops_the_run_without_finalizing_it(start, registry, client, r, prefix):
    @define_workflow("stolen", registry=registry)
    def stolen(ctx):
        while True:
            try:
                gevent.sleep(0.05)
            except Exception:  # a handler that swallows errors still stops
                pass

    worker = start(lease_ms=300)
    handle = stolen.run(None, client=client)
    lease_key = client.keys.run_lease(handle.id, "default")
    wait_until(lambda: r.get(lease_key))
    r.set(lease_key, "lease_someone-else", px=5000)  # another worker owns it now
    wait_until(lambda: worker.stats["abandoned"] == 1, timeout=3)
    fields = r.hgetall(client.keys.run(handle.id, "default"))
    assert fields["status"] == "running" and "finishedAt" not in fields
    assert r.get(lease_key) == "lease_someone-else"  # not touched
    assert handle.id in r.lrange(client.keys.queue_processing("default"), 0, -1)


def test_lease_renewal_failures_stop_the_run(registry, client, r, redis_servers, prefix):
    from redflow import start_worker
    from redflow.testing import RedisServer

    server = RedisServer().start()
    redis_servers.append(server)

    @define_workflow("outage", registry=registry)
    def outage(ctx):
        gevent.sleep(30)

    worker = start_worker(registry, url=server.url, prefix=prefix, lease_ms=400, blmove_timeout=0.2)
    try:
        from redflow import create_client

        local = create_client(server.url, prefix=prefix, registry=registry)
        handle = outage.run(None, client=local)
        wait_until(lambda: handle.status() == "running")
        server.stop()
        wait_until(lambda: worker.stats["abandoned"] == 1, timeout=5, message="two failed renewals")
    finally:
        worker.stop(timeout=1)


def test_redis_failing_while_a_step_is_recorded_abandons_the_attempt_without_failing_it(registry, prefix, redis_servers):
    from redflow import create_client, start_worker
    from redflow.testing import RedisServer

    server = RedisServer(persistent=True).start()
    redis_servers.append(server)
    failures, executions = [], []

    def stop_redis_the_first_time():
        executions.append(1)
        if len(executions) == 1:
            server.stop()  # the step's record cannot be written now
        return len(executions)

    @define_workflow("fragile", max_attempts=1, on_failure=failures.append, registry=registry)
    def fragile(ctx):
        return ctx.step.run("first", stop_redis_the_first_time)

    worker = start_worker(registry, url=server.url, prefix=prefix, lease_ms=500, blmove_timeout=0.2, reaper_interval_ms=100)
    local = create_client(server.url, prefix=prefix, registry=registry)
    try:
        handle = fragile.run(None, client=local)
        wait_until(lambda: worker.stats["abandoned"] == 1, timeout=10, message="the attempt to be abandoned")
        assert failures == [] and worker.stats["failed"] == 0
        server.start()
        assert handle.result(15) == 2  # recovered: the step whose record was lost ran again
        assert local.get_run(handle.id).attempt == 1  # no attempt was burned
    finally:
        worker.stop(timeout=2)
        local.close()


# 4. skips ------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["succeeded", "failed", "canceled", "scheduled", "bogus"])
def test_runs_not_queued_or_running_are_dropped_without_work(start, registry, client, r, prefix, status):
    @define_workflow("never", registry=registry)
    def never(ctx):
        bump(r, prefix, "never")

    k = client.keys
    r.hset(k.run("run_x", "default"), mapping={"workflow": "never", "queue": "default", "status": status, "inputJson": "null"})
    r.lpush(k.queue_ready("default"), "run_x")
    worker = start()
    wait_until(lambda: worker.stats["skipped"] == 1)
    assert r.llen(k.queue_processing("default")) == 0 and r.llen(k.queue_ready("default")) == 0
    assert r.hget(k.run("run_x", "default"), "status") == status and count(r, prefix, "never") == 0
    assert r.exists(k.run_lease("run_x", "default")) == 0


def test_a_queue_entry_whose_run_hash_is_missing_is_dropped(start, registry, client, r):
    @define_workflow("ghost", registry=registry)
    def ghost(ctx):
        return None

    r.lpush(client.keys.queue_ready("default"), "run_missing")
    worker = start()
    wait_until(lambda: worker.stats["skipped"] == 1)
    assert r.llen(client.keys.queue_processing("default")) == 0
    assert r.exists(client.keys.run("run_missing", "default")) == 0


# 5. cancellation -----------------------------------------------------------------


def test_cancel_requested_before_start_finalizes_canceled(start, registry, client, r, prefix):
    @define_workflow("late", registry=registry)
    def late(ctx):
        bump(r, prefix, "late")

    handle = late.run(None, client=client)
    r.hset(client.keys.run(handle.id, "default"), "cancelRequestedAt", str(clock.now_ms()))
    start()
    with pytest.raises(CanceledError):
        handle.result(5)
    assert count(r, prefix, "late") == 0


def test_cancel_during_a_run_sets_the_signal_and_stops_the_handler(start, registry, client, r, prefix):
    seen = {}

    @define_workflow("stubborn", registry=registry)
    def stubborn(ctx):
        seen["signal"] = ctx.signal
        while True:
            try:
                gevent.sleep(0.02)
            except Exception:  # cannot swallow the worker's interrupt
                pass

    start()
    handle = stubborn.run(None, client=client)
    wait_until(lambda: handle.status() == "running")
    began = time.monotonic()
    assert client.cancel(handle.id, reason="enough") is True
    with pytest.raises(CanceledError, match="enough"):
        handle.result(5)
    assert time.monotonic() - began < 1.0  # polled every 100 ms
    assert seen["signal"].is_set() and seen["signal"].reason == "canceled"
    run = client.get_run(handle.id)
    assert run.error["name"] == "CanceledError" and run.cancel_reason == "enough"


def test_a_cancel_noticed_at_a_step_boundary_stops_the_run_there(start, registry, client, r, prefix):
    @define_workflow("steps", registry=registry)
    def steps(ctx):
        ctx.step.run("one", lambda: client.cancel(ctx.run.id))  # the cancel lands while the step runs
        ctx.step.run("two", lambda: bump(r, prefix, "two"))

    start(cancel_poll_ms=5000)  # the poll would be too slow: the step record reports it
    handle = steps.run(None, client=client)
    with pytest.raises(CanceledError):
        handle.result(5)
    assert count(r, prefix, "two") == 0


# 6. attempts ---------------------------------------------------------------------


def test_attempt_counts_fresh_pickups_only_not_recoveries(start, registry, client, r):
    seen = []

    @define_workflow("recover", registry=registry)
    def recover(ctx):
        seen.append(ctx.run.attempt)
        return ctx.run.attempt

    k = client.keys
    # a run a crashed worker had started: status running, attempt 1, back in ready
    write_run(r, client, "run_rec", {"workflow": "recover", "queue": "default", "status": "running", "inputJson": "null",
                                     "attempt": "1", "maxAttempts": "3", "createdAt": "1", "startedAt": "5"})  # fmt: skip
    r.zadd(k.runs_status("running", "default"), {"run_rec": 5})
    r.lpush(k.queue_ready("default"), "run_rec")
    start()
    assert client.wait_for("run_rec", timeout=5).outcome() == 1
    fields = r.hgetall(k.run("run_rec", "default"))
    assert fields["attempt"] == "1" and fields["startedAt"] == "5" and seen == [1]

    fresh = recover.run(None, client=client)
    assert fresh.result(5) == 1
    assert r.hget(k.run(fresh.id, "default"), "attempt") == "1"


# 7. unknown workflow, invalid input ----------------------------------------------


def test_an_unknown_workflow_fails_the_run(start, registry, client, r):
    @define_workflow("known", registry=registry)
    def known(ctx):
        return None

    k = client.keys
    write_run(r, client, "run_unknown", {"workflow": "vanished", "queue": "default", "status": "queued",
                                         "inputJson": "null", "attempt": "0", "maxAttempts": "3"})  # fmt: skip
    r.lpush(k.queue_ready("default"), "run_unknown")
    start()
    with pytest.raises(RunFailedError, match="UnknownWorkflowError"):
        client.wait_for("run_unknown", timeout=5).outcome()
    assert client.get_run("run_unknown").error["kind"] == "unknown_workflow"


def test_invalid_input_calls_on_failure_and_fails_without_retry(start, registry, client, r):
    failures = []

    def positive(value):
        if value <= 0:
            raise ValueError("must be positive")
        return value

    @define_workflow("checked", schema=positive, max_attempts=3, on_failure=failures.append, registry=registry)
    def checked(ctx):
        return ctx.input

    handle = checked.run(5, client=client)
    r.hset(client.keys.run(handle.id, "default"), "inputJson", "-1")  # written by a client that did not validate
    start()
    with pytest.raises(RunFailedError, match="must be positive"):
        handle.result(5)
    run = client.get_run(handle.id)
    assert run.error["kind"] == "validation" and run.attempt == 1
    assert len(failures) == 1 and failures[0].run.id == handle.id and failures[0].input is None


# 11. errors and retries ------------------------------------------------------------


def test_a_retryable_error_schedules_a_retry_with_backoff(start, registry, client, r, prefix):
    @define_workflow("flaky", max_attempts=3, registry=registry)
    def flaky(ctx):
        bump(r, prefix, "flaky")
        if ctx.run.attempt < 3:
            raise ValueError(f"attempt {ctx.run.attempt}")
        return "third time"

    start()
    handle = flaky.run(None, client=client)
    wait_until(lambda: client.get_run(handle.id).status == "scheduled")
    run = client.get_run(handle.id)
    assert run.error["message"] == "attempt 1" and run.error["kind"] == "error"
    assert 0.2 <= run.available_at - time.time() + 0.05 <= 0.45
    assert handle.result(10) == "third time"
    assert count(r, prefix, "flaky") == 3 and client.get_run(handle.id).attempt == 3


def test_out_of_attempts_calls_on_failure_whose_errors_are_swallowed(start, registry, client):
    calls = []

    def on_failure(ctx):
        calls.append((ctx.run.attempt, str(ctx.error), ctx.input))
        raise RuntimeError("on_failure itself breaks")

    @define_workflow("doomed", max_attempts=2, on_failure=on_failure, registry=registry)
    def doomed(ctx):
        raise ValueError("always")

    start()
    handle = doomed.run({"k": 1}, client=client)
    with pytest.raises(RunFailedError, match="always"):
        handle.result(10)
    assert calls == [(2, "always", {"k": 1})]
    assert client.get_run(handle.id).attempt == 2


def test_non_retryable_error_never_retries(start, registry, client, r, prefix):
    class PaymentDeclined(NonRetryableError):
        pass

    @define_workflow("charge", max_attempts=5, registry=registry)
    def charge(ctx):
        bump(r, prefix, "charge")
        raise PaymentDeclined("card declined")

    start()
    handle = charge.run(None, client=client)
    with pytest.raises(RunFailedError, match="card declined"):
        handle.result(5)
    run = client.get_run(handle.id)
    assert run.error["name"] == "PaymentDeclined" and run.error["kind"] == "non_retriable"
    assert count(r, prefix, "charge") == 1
