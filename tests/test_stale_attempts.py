"""An attempt that outlived its lease, and the children of a canceled run (issue 28, defects 2 and 8).

In-process workers on the private redis-server. A worker "stalled past its
lease" is one whose lease keeper was stopped (nothing renews its leases, as
while a process is frozen) while its handler waits on a gate the test opens
later; the freezes of real processes are in tests/chaos/test_frozen_workers.py.
Executions are counted in Redis by the handlers themselves (``bump``).

The invariants: an attempt that lost its run runs no further step, and
records nothing; no child of a canceled run runs on after the cancel,
whoever started it and whenever.
"""

from __future__ import annotations

import gevent
import pytest
from gevent.monkey import get_original
from helpers import wait_until
from redis.exceptions import ConnectionError as RedisConnectionError

from redflow import CanceledError, RedflowClient, define_workflow
from redflow.core.keys import new_id
from redflow.engine.attempt import Attempt
from redflow.store.requests import StartRequest

LEASE_MS = 1000  # the test workers' lease (WORKER_TEST_DEFAULTS)
#: Sleeps without yielding to gevent: the whole process, lease keeper included, stands still.
freeze = get_original("time", "sleep")


def count(r, prefix, name):
    return int(r.get(f"{prefix}:count:{name}") or 0)


def bump(r, prefix, name):
    return r.incr(f"{prefix}:count:{name}")


def gate(r, prefix, name):
    """Wait (cooperatively) until the test opens the gate ``name``."""
    while not r.exists(f"{prefix}:gate:{name}"):
        gevent.sleep(0.02)


def open_gate(r, prefix, name):
    r.set(f"{prefix}:gate:{name}", 1)


def stall(worker, r, client, run_id):
    """Stop the worker's lease keeper (nothing renews its leases any more) and wait until the run's lease is gone."""
    worker.keeper.stop()
    wait_until(lambda: not r.exists(client.keys.run_lease(run_id)), timeout=10, message="the lease to expire")


# -- the ownership check (confirm_run.lua), one case per way the run can be -------------------------


def _started(client, r, registry):
    """A run started by an attempt of token ``ta`` as a worker starts it: (run id, ta)."""

    @define_workflow("plain", registry=registry)
    def plain(ctx):
        return None

    run_id, token = plain.run(None, client=client).id, new_id("lease")
    assert r.lmove(client.keys.queue_ready("default"), client.keys.queue_processing("default")) == run_id
    assert client.scripts.start_run(StartRequest(run_id, "default", token, 60_000, client.now_ms())).kind == "started"
    return run_id, token


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("holds its lease", (True, "running", "")),
        ("its lease lapsed, nobody took the run", (True, "running", "")),
        ("another attempt holds the lease", (False, "running", "")),
        ("another attempt started the run since", (False, "running", "")),
        ("a cancel is pending", (True, "running", "*")),
        ("canceled while its lease was gone", (False, "canceled", "*")),
        ("the run is gone", (False, "", "")),
    ],
)
def test_confirm_run_tells_an_attempt_whether_it_still_owns_its_run(client, r, registry, case, expected):
    run_id, token = _started(client, r, registry)
    lease, run_key = client.keys.run_lease(run_id), client.keys.run(run_id)
    if case in ("its lease lapsed, nobody took the run", "canceled while its lease was gone"):
        r.delete(lease)
    if case == "another attempt holds the lease":
        r.set(lease, "lease_other", px=60_000)
    if case == "another attempt started the run since":
        r.delete(lease)
        r.hset(run_key, "leaseToken", "lease_other")
    if case in ("a cancel is pending", "canceled while its lease was gone"):
        assert client.cancel(run_id)
    if case == "the run is gone":
        r.delete(run_key, lease)

    seen = client.scripts.confirm_run(run_id=run_id, queue="default", token=token, lease_ms=5000)
    assert (seen.owned, seen.status, "*" if seen.cancel_requested_at else "") == expected
    assert seen.canceled == (expected[2] == "*")
    if seen.owned:  # an owner holds the lease for another lease_ms, retaken if it had lapsed
        assert r.get(lease) == token and 0 < r.pttl(lease) <= 5000
    else:
        assert r.get(lease) in (None, "lease_other")


@pytest.mark.parametrize("check_lease", [True, False], ids=["lease checked", "lease fresh"])
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("holds its lease", ("saved", "")),
        ("its lease lapsed, nobody took the run", ("saved", "")),
        ("another attempt started the run since", ("stale", "")),
        ("another attempt started the run and holds its lease", ("stale", "")),
        ("a cancel is pending", ("saved", "*")),
        ("canceled while its lease was gone", ("stale", "")),
        ("the run is gone", ("stale", "")),
    ],
)
def test_a_step_record_is_refused_to_an_attempt_that_does_not_own_its_run(client, r, registry, case, expected, check_lease):
    """save_step.lua: with its lease fresh (``check_lease=False``: written less than half a
    lease ago) the run hash's fence decides alone, and where it does not hold the lease is
    read as with the check; either way a run another attempt started, a canceled run and a
    gone one refuse the record. A save that read the lease extends it (``renewed``)."""
    run_id, token = _started(client, r, registry)
    lease, run_key, steps_key = client.keys.run_lease(run_id), client.keys.run(run_id), client.keys.run_steps(run_id)
    if case in ("its lease lapsed, nobody took the run", "canceled while its lease was gone", "another attempt started the run since"):
        r.delete(lease)
    if case.startswith("another attempt started the run"):
        r.hset(run_key, "leaseToken", "lease_other")
    if case == "another attempt started the run and holds its lease":
        r.set(lease, "lease_other", px=60_000)
    if case in ("a cancel is pending", "canceled while its lease was gone"):
        assert client.cancel(run_id)
    if case == "the run is gone":
        r.delete(run_key, lease)

    saved = client.scripts.save_step(
        run_id=run_id, queue="default", token=token, name="s", step_json='{"status":"succeeded"}', lease_ms=5000, check_lease=check_lease
    )
    assert (saved.state, "*" if saved.cancel_requested_at else "") == expected
    assert (r.hget(steps_key, "s") is not None) == (saved.state == "saved")
    assert saved.renewed == (saved.state == "saved" and check_lease)
    if saved.renewed:  # read and extended (retaken if it had lapsed)
        assert r.get(lease) == token and 0 < r.pttl(lease) <= 5000


def test_a_fresh_lease_record_is_fenced_by_the_hash_alone(client, r, registry):
    """What the fresh path trusts: no command touches the lease key (another client's take-over
    needs our lease expired, which a lease written less than half a lease ago cannot be)."""
    run_id, token = _started(client, r, registry)
    lease = client.keys.run_lease(run_id)
    before = r.pttl(lease)
    saved = client.scripts.save_step(
        run_id=run_id, queue="default", token=token, name="s", step_json="{}", lease_ms=5000, check_lease=False
    )
    assert saved.state == "saved" and not saved.renewed
    assert r.get(lease) == token and before - 1000 <= r.pttl(lease) <= before  # not extended to 5 s


@pytest.fixture
def steps_after_a_gate(registry, r, prefix):
    """Steps a, b, c; the first execution of the handler waits at a gate between a and b."""

    @define_workflow("gated", registry=registry)
    def gated(ctx):
        first = bump(r, prefix, "handler") == 1
        ctx.step.run("a", lambda: bump(r, prefix, "a"))
        if first:
            bump(r, prefix, "at-gate")
            gate(r, prefix, "go")
        ctx.step.run("b", lambda: bump(r, prefix, "b"))
        ctx.step.run("c", lambda: bump(r, prefix, "c"))
        return "done"

    return gated


def test_an_attempt_that_lost_its_run_while_stalled_runs_no_further_step(start, client, r, prefix, steps_after_a_gate):
    stalled = start(concurrency=1)
    handle = steps_after_a_gate.run(None, client=client)
    wait_until(lambda: count(r, prefix, "at-gate") == 1, timeout=10, message="the handler at its gate")
    stall(stalled, r, client, handle.id)
    start(concurrency=2)  # takes the run over once it is reaped
    assert handle.result(20) == "done"
    steps_by_new_owner = r.hgetall(client.keys.run_steps(handle.id))

    open_gate(r, prefix, "go")  # the stalled handler goes on to step b
    wait_until(lambda: stalled.stats["abandoned"] == 1, timeout=10, message="the stalled attempt to stop")
    assert (count(r, prefix, "b"), count(r, prefix, "c"), count(r, prefix, "handler")) == (1, 1, 2)
    assert r.hgetall(client.keys.run_steps(handle.id)) == steps_by_new_owner


def test_an_attempt_whose_lease_lapsed_while_nobody_took_the_run_takes_it_again_and_finishes(start, client, r, prefix, steps_after_a_gate):
    stalled = start(concurrency=1)  # its one slot is the stalled attempt's: nobody else can take the run
    handle = steps_after_a_gate.run(None, client=client)
    wait_until(lambda: count(r, prefix, "at-gate") == 1, timeout=10, message="the handler at its gate")
    stall(stalled, r, client, handle.id)

    open_gate(r, prefix, "go")
    assert handle.result(20) == "done"
    assert (count(r, prefix, "a"), count(r, prefix, "b"), count(r, prefix, "c"), count(r, prefix, "handler")) == (1, 1, 1, 1)
    assert client.get_run(handle.id).attempt == 1 and stalled.stats["succeeded"] == 1


# -- children of a canceled run ---------------------------------------------------------------


@pytest.fixture
def kids(registry, r, prefix):
    """The children: on their own queue; each holds its slot until it is canceled."""

    @define_workflow("kid", registry=registry, queue="kids")
    def kid(ctx):
        bump(r, prefix, "kid")
        ctx.step.run("hold", lambda signal: signal.wait(60))
        bump(r, prefix, "kid-finished")

    return kid


def all_canceled(client, run_ids):
    return all(client.get_run(run_id).status == "canceled" for run_id in run_ids)


def test_a_run_canceled_while_its_worker_stalled_before_run_workflows_starts_no_child(start, registry, client, r, prefix, kids):
    @define_workflow("parent", registry=registry)
    def parent(ctx):
        if bump(r, prefix, "parent") == 1:
            gate(r, prefix, "go")
        return ctx.step.run_workflows("fan-out", "kid", [{"i": i} for i in range(5)])

    stalled = start(concurrency=1, queues=["default"])
    start(concurrency=6, queues=["kids"])
    handle = parent.run(None, client=client)
    wait_until(lambda: count(r, prefix, "parent") == 1, timeout=10, message="the parent at its gate")
    stall(stalled, r, client, handle.id)
    assert client.cancel(handle.id)  # its lease is gone: canceled at once, with no children yet

    open_gate(r, prefix, "go")
    wait_until(lambda: stalled.stats["canceled"] + stalled.stats["abandoned"] == 1, timeout=10, message="the stalled attempt to end")
    gevent.sleep(0.3)  # a child started anyway would be claimed by now
    assert client.list_children(handle.id) == [] and count(r, prefix, "kid") == 0
    with pytest.raises(CanceledError):
        handle.result(1)


def cancel_then(create, client, r, run_id, *, frozen: bool):
    """A cancel that lands after the attempt's ownership check and before its children exist
    (its worker stalled past its lease in between), then the children's creation. ``frozen``:
    the whole process stops meanwhile (keeper included), so that on waking the keeper's renewal
    is due and refused, and it reports the lease lost while the children are started."""
    r.delete(client.keys.run_lease(run_id, client.queue_of(run_id)))
    assert client.cancel(run_id)  # no lease: canceled at once; the cascade finds no child yet
    if frozen:
        freeze(0.6 * LEASE_MS / 1000)
    created = create()
    if frozen:
        gevent.sleep(0.2)  # the keeper's tick, due since the freeze, lands here
    return created


def start_children_late(monkeypatch, client, r, *, frozen: bool, fail: bool = False):
    """Every ``start_children`` of a worker lands just after a cancel of its parent (see
    :func:`cancel_then`); ``fail``: then raises, as Redis failing after the children were sent."""
    original = Attempt.start_children

    def late(self, workflow, inputs, step):
        created = cancel_then(lambda: original(self, workflow, inputs, step), client, r, self.run_id, frozen=frozen)
        if fail:
            raise RedisConnectionError("Redis went away after the children were sent")
        return created

    monkeypatch.setattr(Attempt, "start_children", late)


@pytest.fixture
def fan(registry, kids):
    """The parent: one ``kid`` per ``count`` of its input, through run_workflows."""

    @define_workflow("parent", registry=registry)
    def parent(ctx):
        return ctx.step.run_workflows("fan-out", "kid", [{"i": i} for i in range(ctx.input["count"])])

    return parent


def serve(start, *, parents: int = 2, kids: int = 6):
    """A worker for the parents (returned), another for the children."""
    worker = start(concurrency=parents, queues=["default"])
    start(concurrency=kids, queues=["kids"])
    return worker


@pytest.mark.parametrize("frozen", [False, True], ids=["creator-goes-on", "keeper-reports-the-lease-lost-meanwhile"])
def test_children_started_just_after_their_parent_was_canceled_are_all_canceled(start, client, r, prefix, fan, monkeypatch, frozen):
    start_children_late(monkeypatch, client, r, frozen=frozen)
    serve(start)
    handle = fan.run({"count": 5}, client=client)
    wait_until(lambda: len(client.list_children(handle.id)) == 5, timeout=10, message="the children started")
    children = client.list_children(handle.id)
    wait_until(lambda: all_canceled(client, children), timeout=10, message="every child canceled")
    assert count(r, prefix, "kid-finished") == 0
    assert client.get_run(handle.id).status == "canceled"


def test_a_child_of_run_workflow_started_just_after_its_parent_was_canceled_is_canceled(
    start, registry, client, r, prefix, kids, monkeypatch
):
    original = RedflowClient.run

    def run_late(self, workflow, input=None, **options):
        if options.get("parent_run_id") is None:
            return original(self, workflow, input, **options)
        return cancel_then(lambda: original(self, workflow, input, **options), client, r, options["parent_run_id"], frozen=True)

    monkeypatch.setattr(RedflowClient, "run", run_late)

    @define_workflow("parent", registry=registry)
    def parent(ctx):
        return ctx.step.run_workflow("one", "kid", {"i": 0})

    start(concurrency=2, queues=["default"])
    start(concurrency=2, queues=["kids"])
    handle = parent.run(None, client=client)
    wait_until(lambda: len(client.list_children(handle.id)) == 1, timeout=10, message="the child started")
    wait_until(lambda: all_canceled(client, client.list_children(handle.id)), timeout=10, message="the child canceled")
    assert count(r, prefix, "kid-finished") == 0


def test_an_attempt_stopped_between_starting_children_and_reading_its_run_again_cancels_them_as_it_is_abandoned(
    start, client, r, prefix, fan, monkeypatch
):
    start_children_late(monkeypatch, client, r, frozen=True, fail=True)
    worker = serve(start)
    handle = fan.run({"count": 3}, client=client)
    wait_until(lambda: worker.stats["abandoned"] == 1, timeout=10, message="the attempt abandoned")
    children = client.list_children(handle.id)
    assert len(children) == 3
    wait_until(lambda: all_canceled(client, children), timeout=10, message="every child canceled")
    assert count(r, prefix, "kid-finished") == 0


def test_cancel_many_cancels_the_children_of_the_runs_it_cancels(start, client, r, prefix, fan):
    serve(start, kids=8)
    handles = [fan.run({"count": 3, "p": p}, client=client) for p in range(2)]
    wait_until(lambda: count(r, prefix, "kid") == 6, timeout=10, message="six children holding their slots")
    wait_until(lambda: all(h.status() == "scheduled" for h in handles), timeout=10, message="the parents parked")

    assert client.cancel_many("parent", status=None, reason="enough") == 2
    children = [c for h in handles for c in client.list_children(h.id)]
    wait_until(lambda: all_canceled(client, children), timeout=10, message="every child canceled")
    assert count(r, prefix, "kid-finished") == 0 and client.get_run(children[0]).cancel_reason == "enough"


def test_canceling_a_canceled_run_again_finishes_a_cascade_its_first_canceler_did_not(start, client, r, prefix, fan):
    serve(start, parents=1, kids=4)
    handle = fan.run({"count": 3}, client=client)
    wait_until(lambda: count(r, prefix, "kid") == 3 and handle.status() == "scheduled", timeout=10, message="the parent parked")
    # a client that died between marking the parent and canceling its children
    client.scripts.cancel_run(run_id=handle.id, queue="default", now_ms=client.now_ms(), reason="", error_json="")
    assert handle.status() == "canceled"

    assert client.cancel(handle.id, reason="again") is False  # it was canceled already
    children = client.list_children(handle.id)
    wait_until(lambda: all_canceled(client, children), timeout=10, message="every child canceled")
    assert count(r, prefix, "kid-finished") == 0
