"""Durable waits and fan-out (issue 17): step.sleep / sleep_until, step.wait_for_event,
step.run_workflows, the cancel cascade and ctx.progress, on in-process workers.

Executions are counted in Redis by the handlers themselves (``bump``), apart
from the engine's bookkeeping. Nothing here asserts on speed: orders of
events (finishedAt against startedAt) and counts only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from helpers import wait_until
from invariants import unrecoverable

from redflow import CanceledError, InputValidationError, NonRetryableError, RunFailedError, create_client, define_workflow
from redflow.core import codec
from redflow.store.enqueue import enqueue_children


def count(r, prefix, name):
    return int(r.get(f"{prefix}:count:{name}") or 0)


def bump(r, prefix, name):
    return r.incr(f"{prefix}:count:{name}")


def parked(client, run_id, reason):
    run = client.get_run(run_id)
    return run is not None and run.status == "scheduled" and run.parked_for == reason


def step_record(r, client, run_id, step, queue="default"):
    return codec.loads(r.hget(client.keys.run_steps(run_id, queue), step))


# -- sleep ----------------------------------------------------------------------------


def test_a_sleeping_run_gives_its_slot_back_and_resumes_as_the_same_attempt(start, registry, client, r, prefix):
    @define_workflow("napper", registry=registry)
    def napper(ctx):
        bump(r, prefix, "handler")
        before = ctx.step.run("before", lambda: bump(r, prefix, "before"))
        ctx.step.sleep("nap", 1.5)
        after = ctx.step.run("after", lambda: bump(r, prefix, "after"))
        return {"before": before, "after": after, "attempt": ctx.run.attempt}

    @define_workflow("quick", registry=registry)
    def quick(ctx):
        return ctx.input

    start(concurrency=1)
    sleeper = napper.run(None, client=client)
    wait_until(lambda: parked(client, sleeper.id, "sleep"), message="the sleeper to park")
    run = client.get_run(sleeper.id)
    assert run.parked_step == "nap" and run.attempt == 1
    assert r.exists(client.keys.run_lease(sleeper.id, "default")) == 0  # the lease is given back
    assert unrecoverable(r, client.keys, [sleeper.id]) == {}  # the promoter finds it
    quick_runs = [quick.run(i, client=client) for i in range(5)]
    assert [h.result(10) for h in quick_runs] == list(range(5))  # the one slot is free meanwhile

    assert sleeper.result(15) == {"before": 1, "after": 1, "attempt": 1}
    assert count(r, prefix, "handler") == 2  # ran from the top once more, "before" replayed
    nap, after = step_record(r, client, sleeper.id, "nap"), step_record(r, client, sleeper.id, "after")
    assert nap["status"] == "succeeded" and nap["finishedAt"] - nap["startedAt"] >= 1500
    assert all(client.get_run(h.id).finished_at * 1000 <= after["startedAt"] for h in quick_runs)
    done = client.get_run(sleeper.id)
    assert done.status == "succeeded" and done.attempt == 1 and done.parked_for is None


def test_a_sleep_that_is_already_over_replays_as_done_without_parking(start, registry, client):
    @define_workflow("no-wait", registry=registry)
    def no_wait(ctx):
        ctx.step.sleep_until("past", datetime(2001, 1, 1, tzinfo=UTC))
        ctx.step.sleep_until("past-unix", time.time() - 60)
        ctx.step.sleep("zero", timedelta(0))
        return "done"

    worker = start()
    handle = no_wait.run(None, client=client)
    assert handle.result(5) == "done"
    assert worker.stats["parked"] == 0
    assert [(s.name, s.status) for s in client.get_steps(handle.id)] == [
        ("past", "succeeded"),
        ("past-unix", "succeeded"),
        ("zero", "succeeded"),
    ]


def test_canceling_a_sleeping_run_ends_it_at_once(start, registry, client, r):
    @define_workflow("long-nap", registry=registry)
    def long_nap(ctx):
        ctx.step.sleep("nap", timedelta(hours=1))

    start()
    handle = long_nap.run(None, client=client)
    wait_until(lambda: parked(client, handle.id, "sleep"))
    assert client.cancel(handle.id, reason="no more naps")
    with pytest.raises(CanceledError):
        handle.result(5)
    assert r.zscore(client.keys.queue_scheduled("default"), handle.id) is None


# -- events ---------------------------------------------------------------------------


def _approval(registry, r, prefix):
    @define_workflow("approval", registry=registry)
    def approval(ctx):
        bump(r, prefix, f"handler:{ctx.input['order']}")
        timeout = ctx.input.get("timeout")
        return ctx.step.wait_for_event("approval", "order.approved", match={"order": ctx.input["order"]}, timeout=timeout)

    return approval


def test_an_event_wait_resumes_on_a_matching_payload_once_and_returns_it(start, registry, client, r, prefix):
    approval = _approval(registry, r, prefix)
    start(concurrency=2)
    handle = approval.run({"order": 7}, client=client)
    wait_until(lambda: parked(client, handle.id, "event"))
    waiters = client.keys.event_waiters("order.approved")

    client.emit_event("order.approved", {"order": 8, "by": "eve"})  # another order: delivered to nobody
    assert client.get_run(handle.id).status == "scheduled" and r.hexists(waiters, handle.id)
    client.emit_event("order.approved", {"order": 7, "by": "ada"})
    assert handle.result(5) == {"order": 7, "by": "ada"}
    assert r.hlen(waiters) == 0
    client.emit_event("order.approved", {"order": 7, "by": "bob"})  # a second one finds no waiter
    assert count(r, prefix, "handler:7") == 2
    assert step_record(r, client, handle.id, "approval")["outputJson"] == '{"order":7,"by":"ada"}'
    assert client.get_run(handle.id).output == {"order": 7, "by": "ada"}


def test_a_run_canceled_while_it_waits_for_an_event_leaves_no_waiter_entry_once_purged(start, registry, client, r, prefix):
    approval = _approval(registry, r, prefix)
    start()
    canceled, waiting = approval.run({"order": 1}, client=client), approval.run({"order": 2}, client=client)
    wait_until(lambda: parked(client, canceled.id, "event") and parked(client, waiting.id, "event"))
    waiters = client.keys.event_waiters("order.approved")
    assert client.cancel(canceled.id, reason="order withdrawn")
    with pytest.raises(CanceledError):
        canceled.result(5)
    assert r.hexists(waiters, canceled.id)  # until the event comes or the run is purged

    assert client.purge(0, status="canceled") == 1
    assert r.exists(client.keys.run(canceled.id, "default"), client.keys.run_steps(canceled.id, "default")) == 0
    assert not r.hexists(waiters, canceled.id) and r.hexists(waiters, waiting.id)  # only the purged run's entry goes
    client.emit_event("order.approved", {"order": 2})
    assert waiting.result(5) == {"order": 2}


def test_an_event_wait_returns_none_after_its_timeout(start, registry, client, r, prefix):
    approval = _approval(registry, r, prefix)
    start()
    handle = approval.run({"order": 1, "timeout": 0.5}, client=client)
    assert handle.result(10) is None
    assert r.hlen(client.keys.event_waiters("order.approved")) == 0


def test_an_event_emitted_before_the_run_waited_does_not_count(start, registry, client, r, prefix):
    approval = _approval(registry, r, prefix)
    client.emit_event("order.approved", {"order": 3})
    start()
    handle = approval.run({"order": 3, "timeout": 0.5}, client=client)
    assert handle.result(10) is None


def test_a_scheduled_event_reaches_its_waiters_when_it_fires(start, registry, client, r, prefix):
    approval = _approval(registry, r, prefix)
    start()
    handle = approval.run({"order": 5}, client=client)
    wait_until(lambda: parked(client, handle.id, "event"))
    client.schedule_event("order.approved", {"order": 5, "late": True}, at=time.time() + 0.3)
    assert handle.result(10) == {"order": 5, "late": True}
    # removed once delivered: the delivery resumes the run before the entry's ZREM, so the run may end first
    wait_until(lambda: r.zcard(client.keys.scheduled_events()) == 0, timeout=5, message="the delivered event's entry removed")


def test_a_hundred_runs_waiting_on_distinct_keys_each_resume_once_on_their_own_event(start, registry, client, r, prefix):
    approval = _approval(registry, r, prefix)
    start(concurrency=8)
    handles = [approval.run({"order": i}, client=client) for i in range(100)]
    waiters = client.keys.event_waiters("order.approved")
    wait_until(lambda: client.count_runs("scheduled") == 100 and r.hlen(waiters) == 100, timeout=30, message="100 parked waiters")
    for i in range(100):
        client.emit_event("order.approved", {"order": i, "n": i})
    assert [h.result(30) for h in handles] == [{"order": i, "n": i} for i in range(100)]
    assert [count(r, prefix, f"handler:{i}") for i in range(100)] == [2] * 100
    assert r.hlen(waiters) == 0


def test_emitting_an_event_nobody_waits_for_is_one_round_trip(client, redis_url):
    from redflow.bench.probe import Probe, server_delta

    probe = Probe(redis_url)
    client.emit_event("warm.up", None)  # the connection is opened outside the sample
    before = probe.sample()
    assert client.emit_event("nobody.listens", {"x": 1}) == []
    delta = server_delta(before, probe.sample())
    probe.close()
    assert delta.trips == 1 and dict(delta.commands) == {"smembers": 1, "hgetall": 1}


# -- run_workflows ---------------------------------------------------------------------


def _fan(registry, r, prefix, **options):
    @define_workflow("leaf", registry=registry)
    def leaf(ctx):
        bump(r, prefix, f"leaf:{ctx.input['n']}")
        if ctx.input.get("fail"):
            raise NonRetryableError(f"leaf {ctx.input['n']} refuses")
        return ctx.input["n"] * 2

    @define_workflow("fan", registry=registry, **options)
    def fan(ctx):
        inputs = [{"n": n, "fail": n in ctx.input.get("fail", [])} for n in range(ctx.input["count"])]
        outputs = ctx.step.run_workflows("fan-out", "leaf", inputs)
        if ctx.input.get("flaky") and ctx.run.attempt == 1:
            raise ConnectionError("the parent's first attempt fails after its children")
        return outputs

    return fan


def test_run_workflows_runs_fifty_children_on_four_slots_and_returns_outputs_in_order(start, registry, client, r, prefix):
    fan = _fan(registry, r, prefix)
    start(concurrency=4)
    handle = fan.run({"count": 50}, client=client)
    assert handle.result(60) == [2 * n for n in range(50)]
    children = client.list_children(handle.id)
    assert len(children) == 50 and [count(r, prefix, f"leaf:{n}") for n in range(50)] == [1] * 50
    assert {client.get_run(c).parent_run_id for c in children} == {handle.id}
    assert client.get_run(handle.id).attempt == 1


def test_run_workflows_does_not_deadlock_a_one_slot_worker(start, registry, client, r, prefix):
    fan = _fan(registry, r, prefix)
    start(concurrency=1)
    assert fan.run({"count": 3}, client=client).result(30) == [0, 2, 4]


def test_a_failed_child_fails_the_parent_naming_it_after_the_others_ended(start, registry, client, r, prefix):
    fan = _fan(registry, r, prefix, max_attempts=1)
    start(concurrency=4)
    handle = fan.run({"count": 6, "fail": [3]}, client=client)
    with pytest.raises(RunFailedError) as raised:
        handle.result(30)
    children = {client.get_run(c).input["n"]: client.get_run(c) for c in client.list_children(handle.id)}
    failed = children[3]
    assert failed.status == "failed" and failed.id in raised.value.error["message"]
    assert "leaf 3 refuses" in raised.value.error["message"]
    parent = client.get_run(handle.id)
    assert all(c.finished_at is not None and c.finished_at <= parent.finished_at for c in children.values())


def test_a_retried_parent_starts_no_child_twice(start, registry, client, r, prefix):
    fan = _fan(registry, r, prefix, max_attempts=2)
    start(concurrency=4)
    handle = fan.run({"count": 5, "flaky": True}, client=client)
    assert handle.result(30) == [0, 2, 4, 6, 8]
    assert client.get_run(handle.id).attempt == 2
    assert len(client.list_children(handle.id)) == 5 and [count(r, prefix, f"leaf:{n}") for n in range(5)] == [1] * 5
    # Starting the children again (a parent's attempt lost before its step was stored) gives the same runs.
    inputs = [{"n": n} for n in range(5)]
    requests = client.targets.children("leaf", inputs, parent_run_id=handle.id, parent_queue="default", step="fan-out")
    again = enqueue_children(client.store, handle.id, requests)
    assert set(again) == set(client.list_children(handle.id))


# -- cancel cascade ----------------------------------------------------------------------


def test_canceling_a_parent_cancels_its_running_children_and_theirs(start, registry, client, r, prefix):
    @define_workflow("holder", registry=registry)
    def holder(ctx):
        bump(r, prefix, "holding")
        ctx.step.run("hold", lambda signal: signal.wait(60))

    @define_workflow("team", registry=registry)
    def team(ctx):
        return ctx.step.run_workflows("members", "holder", [{"i": i} for i in range(5)])

    @define_workflow("boss", registry=registry)
    def boss(ctx):
        return ctx.step.run_workflows("teams", "team", [{"t": 0}, {"t": 1}])

    start(concurrency=12)
    handle = boss.run(None, client=client)
    wait_until(lambda: count(r, prefix, "holding") == 10, timeout=20, message="10 holders running")
    teams = client.list_children(handle.id)
    holders = [h for t in teams for h in client.list_children(t)]
    assert len(holders) == 10 and all(client.get_run(h).status == "running" for h in holders)

    assert client.cancel(handle.id, reason="reorg")
    with pytest.raises(CanceledError):
        handle.result(10)
    wait_until(lambda: all(client.get_run(run_id).status == "canceled" for run_id in teams + holders), timeout=15,
               message="every child and grandchild canceled")  # fmt: skip
    assert client.get_run(holders[0]).cancel_reason == "reorg"


# -- progress ---------------------------------------------------------------------------


def test_progress_is_visible_from_another_client_while_the_run_runs(start, registry, client, r, prefix, redis_url):
    gate = f"{prefix}:gate"

    @define_workflow("reporter", registry=registry)
    def reporter(ctx):
        ctx.progress({"done": 1, "total": 2})
        ctx.step.run("wait", lambda: wait_until(lambda: r.exists(gate), timeout=20))
        ctx.progress({"done": 2, "total": 2})
        return "ok"

    start()
    handle = reporter.run(None, client=client)
    with create_client(redis_url, prefix=prefix) as other:
        wait_until(lambda: other.get_run(handle.id).progress is not None)
        seen = other.get_run(handle.id)
        assert seen.status == "running" and seen.progress == {"done": 1, "total": 2}
        assert other.get_run(handle.id).progress == handle.progress()
        r.set(gate, 1)
        assert handle.result(10) == "ok"
        assert other.get_run(handle.id).progress == {"done": 2, "total": 2}


def test_a_run_that_never_reports_progress_has_none(start, registry, client):
    @define_workflow("silent", registry=registry)
    def silent(ctx):
        return 1

    start()
    handle = silent.run(None, client=client)
    assert handle.result(5) == 1 and handle.progress() is None and client.get_run(handle.id).progress is None


# -- bad input -----------------------------------------------------------------------------


MISUSES = {
    "negative sleep": (lambda ctx: ctx.step.sleep("s", -1), "sleep needs seconds >= 0"),
    "sleep of text": (lambda ctx: ctx.step.sleep("s", "1h"), "sleep needs seconds >= 0"),
    "sleep until nonsense": (lambda ctx: ctx.step.sleep_until("s", "tomorrow"), "sleep_until needs unix seconds"),
    "no event name": (lambda ctx: ctx.step.wait_for_event("w", ""), "non-empty event name"),
    "match not a dict": (lambda ctx: ctx.step.wait_for_event("w", "e", match=[1]), "match must be a dict"),
    "match not JSON": (lambda ctx: ctx.step.wait_for_event("w", "e", match={"a": object()}), "match must be JSON"),
    "negative timeout": (lambda ctx: ctx.step.wait_for_event("w", "e", timeout=-5), "timeout needs seconds >= 0"),
    "inputs not a list": (lambda ctx: ctx.step.run_workflows("f", "leaf", "abc"), "needs a list of inputs"),
    "wait inside a step": (lambda ctx: ctx.step.run("outer", lambda: ctx.step.sleep("inner", 1)), "cannot run inside another step"),
    "progress not JSON": (lambda ctx: ctx.progress({1, 2}), "progress must be JSON-serializable"),
}


@pytest.mark.parametrize("case", sorted(MISUSES))
def test_a_misused_wait_fails_the_run_with_a_clear_error_and_parks_nothing(case, start, registry, client, r):
    misuse, message = MISUSES[case]

    @define_workflow("misuse", registry=registry, max_attempts=1)
    def misuse_wf(ctx):
        misuse(ctx)

    worker = start()
    handle = misuse_wf.run(None, client=client)
    with pytest.raises(RunFailedError) as raised:
        handle.result(5)
    assert message in raised.value.error["message"]
    assert worker.stats["parked"] == 0 and r.zcard(client.keys.queue_scheduled("default")) == 0


def test_an_event_payload_that_is_not_json_is_refused_and_writes_nothing(client, r):
    for call in (lambda: client.emit_event("e", {1, 2}), lambda: client.schedule_event("e", {1, 2}, at=time.time() + 60)):
        with pytest.raises(InputValidationError, match="payload of event 'e' is not JSON"):
            call()
    assert r.zcard(client.keys.scheduled_events()) == 0


# -- what operators see ------------------------------------------------------------------------


def test_runs_show_and_the_dashboard_say_why_a_run_waits_and_show_its_progress(start, registry, client, redis_url, prefix, capsys):
    import http.client

    from redflow.ops.cli import build_parser
    from redflow.ops.dashboard import serve

    @define_workflow("gatekeeper", registry=registry)
    def gatekeeper(ctx):
        ctx.progress({"stage": "<review>"})
        return ctx.step.wait_for_event("approve", "doc.approved", match={"doc": 1}, timeout=3600)

    start()
    handle = gatekeeper.run(None, client=client)
    wait_until(lambda: parked(client, handle.id, "event"))
    args = build_parser().parse_args(["runs", "show", handle.id, "--redis-url", redis_url, "--prefix", prefix])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert """waiting   waiting for event 'doc.approved' matching {"doc":1} (step 'approve', times out 20""" in out
    assert 'progress  {"stage":"<review>"}' in out and "(waiting: event)" in out

    server = serve(client, "127.0.0.1", 0)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
        conn.request("GET", f"/runs/{handle.id}")
        page = conn.getresponse().read().decode()
        conn.close()
    finally:
        server.stop(timeout=1)
    assert "<dt>waiting</dt><dd>waiting for event &#x27;doc.approved&#x27; matching {&quot;doc&quot;:1}" in page
    assert "<dt>progress</dt><dd><code>{&quot;stage&quot;:&quot;&lt;review&gt;&quot;}</code></dd>" in page
    client.emit_event("doc.approved", {"doc": 1})
    assert handle.result(5) == {"doc": 1}


@pytest.mark.parametrize(
    ("fields", "wait", "shown"),
    [
        ({"parkedFor": "sleep", "availableAt": "4102444800000"}, None, "sleeping until 2100-01-01 00:00:00 (step 'w')"),
        ({"parkedFor": "children"}, {"kind": "children", "children": ["run_a", "run_b"]}, "waiting for its 2 children to end (step 'w')"),
        ({"parkedFor": "event"}, {"kind": "event", "event": "e", "match": None, "timeoutAt": None}, "waiting for event 'e' (step 'w')"),
        (
            {"parkedFor": "signal"},
            {"kind": "signal", "signal": "go", "timeoutAt": 4102444800000},
            "waiting for signal 'go' (step 'w', times out 2100-01-01 00:00:00)",
        ),
        ({"parkedFor": "sleep", "status": "queued"}, None, "-"),
    ],
)
def test_a_parked_runs_wait_is_described_in_words(fields, wait, shown):
    from redflow.core.models import Run, Step
    from redflow.ops.format import describe_wait

    run = Run.from_hash("run_x", {"workflow": "w", "status": "scheduled", "parkedStep": "w", **fields})
    steps = [] if wait is None else [Step.from_json("w", codec.dumps({"status": "running", "seq": 1, "startedAt": 1, "wait": wait}))]
    assert describe_wait(run, steps) == shown
