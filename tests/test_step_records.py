"""Step records sent behind (engine/step_records.py, issue 34).

The record of a first-time step that waited on nothing (no I/O), made while
the attempt's lease is fresh, does not wait for its reply: it leaves with the
settle or at the attempt's next wait, and what its reply says is heeded at
the next step boundary. (A step that waited is recorded as it ends, as
tests/test_worker.py and tests/test_stale_attempts.py show.) The
invariants, each against the interleaving that could break it:

- a record is in Redis before the attempt waits on anything after its step
  (so before any I/O of the next step), and every record reaches Redis by
  the settle;
- a record refused behind (another attempt owns the run) stops the attempt
  at its next step boundary: no later step runs, nothing of it is recorded;
- a cancel pending ends the run canceled, no later step runs;
- a send that failed is sent again, waiting, at the next boundary: no record
  is lost to a broken connection.

In-process workers on the private redis-server; executions counted in
Redis by the handlers (tests/test_stale_attempts.py's helpers).
"""

from __future__ import annotations

import gevent
from helpers import wait_until
from redis.exceptions import ConnectionError as RedisConnectionError
from test_stale_attempts import bump, count, gate, open_gate

from redflow import define_workflow
from redflow.store.scripts import Scripts

LONG_LEASE_MS = 30_000  # the keeper renews at half of it: within a test, only the records' replies tell


def test_a_record_is_in_redis_before_the_attempt_waits_on_anything_after_its_step(start, registry, client, r, prefix):
    @define_workflow("record-then-wait", registry=registry)
    def record_then_wait(ctx):
        first = ctx.step.run("first", lambda: {"n": 1})
        ctx.step.run("second", lambda: gate(r, prefix, "go") or 2)  # waits (polls Redis) until the test opens it
        return first

    start(concurrency=2, lease_ms=LONG_LEASE_MS)
    handle = record_then_wait.run(None, client=client)
    steps_key = client.keys.run_steps(handle.id)
    wait_until(lambda: r.hexists(steps_key, "first"), timeout=10, message="the first step's record while the second waits")
    assert not r.hexists(steps_key, "second")
    open_gate(r, prefix, "go")
    assert handle.result(10) == {"n": 1}
    assert set(r.hgetall(steps_key)) == {"first", "second"}


def test_a_record_refused_behind_stops_the_attempt_at_its_next_step(start, registry, client, r, prefix):
    """Another attempt took the run over (its token in the run's fence and in the lease key)
    just before this one's first step, which waits on nothing: its record, sent when the
    handler waits after it, is refused, and the attempt stops as the next step begins: that
    step never runs and nothing of this attempt is recorded."""
    run_key = client.keys.run

    @define_workflow("taken-over", registry=registry)
    def taken_over(ctx):
        r.hset(run_key(ctx.run.id), "leaseToken", "lease_other")
        r.set(client.keys.run_lease(ctx.run.id), "lease_other", px=60_000)
        ctx.step.run("first", lambda: 1)  # waits on nothing: recorded behind
        gevent.sleep(0.02)  # the record leaves here and is refused
        ctx.step.run("second", lambda: bump(r, prefix, "second"))
        return "done"

    worker = start(concurrency=1, lease_ms=LONG_LEASE_MS)
    handle = taken_over.run(None, client=client)
    wait_until(lambda: worker.stats["abandoned"] == 1, timeout=10, message="the attempt to stop")
    assert count(r, prefix, "second") == 0
    assert r.hgetall(client.keys.run_steps(handle.id)) == {}
    assert r.hget(run_key(handle.id), "status") == "running"  # the other attempt's, untouched


def test_a_cancel_told_by_a_record_sent_behind_stops_the_run_before_the_next_step(start, registry, client, r, prefix):
    """The cancel lands just before a step that waits on nothing: that step's record, sent
    when the handler waits after it, tells it, and the next step never runs (the keeper's
    poll of cancels is slowed down so that only the record can tell)."""

    @define_workflow("canceled-midway", registry=registry)
    def canceled_midway(ctx):
        client.cancel(ctx.run.id)
        ctx.step.run("first", lambda: 1)
        gevent.sleep(0.02)
        ctx.step.run("second", lambda: bump(r, prefix, "second"))
        return "done"

    start(concurrency=1, lease_ms=LONG_LEASE_MS, cancel_poll_ms=5000)
    handle = canceled_midway.run(None, client=client)
    wait_until(lambda: r.hget(client.keys.run(handle.id), "status") == "canceled", timeout=10, message="the run canceled")
    assert count(r, prefix, "second") == 0
    assert r.hexists(client.keys.run_steps(handle.id), "first")  # a cancel request does not refuse a record


def test_records_whose_send_failed_are_sent_again_at_the_next_step(start, registry, client, r, prefix, monkeypatch):
    """The connection broke under a send behind: its records are kept and sent again, waiting,
    when the next step begins; the run finishes with every step recorded once."""
    send_steps, failures = Scripts.send_steps, []

    def failing_once(self, **kwargs):
        if not failures:
            failures.append(kwargs["records"][0].name)
            raise RedisConnectionError("the connection broke (test)")
        return send_steps(self, **kwargs)

    monkeypatch.setattr(Scripts, "send_steps", failing_once)

    @define_workflow("send-fails", registry=registry)
    def send_fails(ctx):
        ran = [ctx.step.run(name, lambda: 1) for name in ("first", "second")]  # wait on nothing: recorded behind
        gevent.sleep(0.05)  # the records leave here: the send fails
        steps_key = client.keys.run_steps(ctx.run.id)
        # ...and they are sent again as the next step begins, before its function runs
        ran.append(ctx.step.run("third", lambda: sorted(r.hkeys(steps_key))))
        return ran

    start(concurrency=1, lease_ms=LONG_LEASE_MS)
    handle = send_fails.run(None, client=client)
    assert handle.result(10) == [1, 1, ["first", "second"]]
    assert failures == ["first"]
    assert set(r.hgetall(client.keys.run_steps(handle.id))) == {"first", "second", "third"}
