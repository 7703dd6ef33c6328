"""Durable steps, child workflows and event steps (issue 4, behaviours 8-10)."""

import time

import gevent
import gevent.event
import pytest
from helpers import wait_until

from redflow import CanceledError, RunFailedError, define_workflow
from redflow.core import codec
from redflow.core.idempotency import step_event_idempotency_key, step_workflow_idempotency_key


def count(r, prefix, name):
    return int(r.get(f"{prefix}:count:{name}") or 0)


def bump(r, prefix, name):
    return r.incr(f"{prefix}:count:{name}")


# 8. steps ------------------------------------------------------------------------


def test_steps_are_recorded_in_the_data_model_format(start, registry, client, r):
    @define_workflow("two", registry=registry)
    def two(ctx):
        a = ctx.step.run("load", lambda: {"user": 7})
        return ctx.step.run("greet", lambda: f"hi {a['user']}")

    start()
    handle = two.run(None, client=client)
    assert handle.result(5) == "hi 7"
    raw = r.hgetall(client.keys.run_steps(handle.id, "default"))
    load, greet = codec.loads(raw["load"]), codec.loads(raw["greet"])
    # The data model's fields in its order, then "attempt": an extension other clients ignore (the run page marks replays by it).
    assert list(load) == ["status", "seq", "startedAt", "finishedAt", "outputJson", "attempt"]
    assert load["status"] == "succeeded" and load["seq"] == 1 and load["outputJson"] == '{"user":7}' and load["attempt"] == 1
    assert greet["seq"] == 2 and greet["startedAt"] >= load["finishedAt"]
    steps = client.get_steps(handle.id)
    assert [(s.name, s.output) for s in steps] == [("load", {"user": 7}), ("greet", "hi 7")]


def test_a_retried_run_replays_succeeded_steps_without_calling_them(start, registry, client, r, prefix):
    @define_workflow("replay", max_attempts=3, registry=registry)
    def replay(ctx):
        first = ctx.step.run("charge", lambda: bump(r, prefix, "charge"))
        second = ctx.step.run("flaky", lambda: bump(r, prefix, "flaky") >= 2 or _raise(ValueError("not yet")))
        return [first, second]

    start()
    handle = replay.run(None, client=client)
    assert handle.result(10) == [1, True]
    assert count(r, prefix, "charge") == 1 and count(r, prefix, "flaky") == 2
    flaky = codec.loads(r.hget(client.keys.run_steps(handle.id, "default"), "flaky"))
    assert flaky["seq"] == 2  # a step re-run after failure keeps its seq


def _raise(exc):
    raise exc


def test_a_failed_step_is_recorded_with_its_error(start, registry, client, r):
    @define_workflow("broken", max_attempts=1, registry=registry)
    def broken(ctx):
        ctx.step.run("explode", lambda: _raise(KeyError("missing")))

    start()
    handle = broken.run(None, client=client)
    with pytest.raises(RunFailedError):
        handle.result(5)
    step = client.get_steps(handle.id)[0]
    assert step.status == "failed" and step.error["name"] == "KeyError" and "missing" in step.error["message"]


def test_a_step_name_used_twice_in_one_run_is_an_error(start, registry, client):
    @define_workflow("dupe", max_attempts=1, registry=registry)
    def dupe(ctx):
        ctx.step.run("same", lambda: 1)
        ctx.step.run("same", lambda: 2)

    start()
    with pytest.raises(RunFailedError, match="Duplicate step name 'same'"):
        dupe.run(None, client=client).result(5)


def test_a_step_over_its_timeout_raises_timeout_error_and_the_run_retries(start, registry, client, r, prefix):
    @define_workflow("slowstep", max_attempts=2, registry=registry)
    def slowstep(ctx):
        def work():
            if bump(r, prefix, "tries") == 1:
                gevent.sleep(60)  # blocks "forever"
            return "fast now"

        return ctx.step.run("work", work, timeout=0.2)

    start()
    handle = slowstep.run(None, client=client)
    began = time.monotonic()
    assert handle.result(10) == "fast now"
    assert time.monotonic() - began < 5
    first_error = client.get_run(handle.id)
    assert first_error.status == "succeeded"
    assert count(r, prefix, "tries") == 2


def test_step_timeout_error_is_recorded_as_kind_timeout(start, registry, client):
    @define_workflow("stuck", max_attempts=1, registry=registry)
    def stuck(ctx):
        ctx.step.run("hang", lambda: gevent.sleep(60), timeout=0.1)

    start()
    handle = stuck.run(None, client=client)
    with pytest.raises(RunFailedError, match="Step timed out: hang"):
        handle.result(5)
    step = client.get_steps(handle.id)[0]
    assert step.error["kind"] == "timeout"


def test_non_json_step_output_is_an_output_serialization_error(start, registry, client):
    @define_workflow("badstep", max_attempts=3, registry=registry)
    def badstep(ctx):
        ctx.step.run("obj", lambda: object())

    @define_workflow("badout", max_attempts=3, registry=registry)
    def badout(ctx):
        return {"when": object()}

    start()
    for wf, match in ((badstep, "Step output is not JSON-serializable: obj"), (badout, "Workflow output is not JSON-serializable")):
        handle = wf.run(None, client=client)
        with pytest.raises(RunFailedError, match=match):
            handle.result(5)
        run = client.get_run(handle.id)
        assert run.error["kind"] == "serialization" and run.attempt == 1  # deterministic: no retry


def test_step_functions_may_take_the_cancel_signal(start, registry, client):
    @define_workflow("sig", registry=registry)
    def sig(ctx):
        return ctx.step.run("check", lambda signal: signal.is_set())

    start()
    assert sig.run(None, client=client).result(5) is False


def test_a_long_step_is_marked_running_while_it_runs(start, registry, client, r):
    released = gevent.event.Event()  # the long step lasts until the test has seen it marked (no race with a loaded machine)

    @define_workflow("marked", registry=registry)
    def marked(ctx):
        ctx.step.run("quick", lambda: 1)
        ctx.step.run("long", lambda: released.wait(10))

    start()
    handle = marked.run(None, client=client)
    try:
        raw = wait_until(lambda: r.hget(client.keys.run_steps(handle.id, "default"), "long"), timeout=10)
        record = codec.loads(raw)
        assert record["status"] == "running" and record["seq"] == 2 and set(record) == {"status", "seq", "startedAt"}
    finally:
        released.set()
    handle.result(5)
    assert codec.loads(r.hget(client.keys.run_steps(handle.id, "default"), "long"))["status"] == "succeeded"


def test_a_corrupt_cached_step_fails_the_run_with_a_clear_error(start, registry, client, r):
    @define_workflow("cached", max_attempts=1, registry=registry)
    def cached(ctx):
        return ctx.step.run("s", lambda: 1)

    handle = cached.run(None, client=client)
    r.hset(client.keys.run_steps(handle.id, "default"), "s", "{garbage")
    r.hset(client.keys.run(handle.id, "default"), "attempt", "1")  # steps exist only after an attempt started the run
    start()
    with pytest.raises(RunFailedError, match="stored record does not decode"):
        handle.result(5)


# 9. child workflows --------------------------------------------------------------


def test_run_workflow_starts_a_child_with_the_seed_idempotency_key(start, registry, client, r):
    @define_workflow("child", registry=registry)
    def child(ctx):
        return ctx.input["n"] * 2

    @define_workflow("parent", registry=registry)
    def parent(ctx):
        return ctx.step.run_workflow("double", "child", {"n": 21})

    start(concurrency=2)
    handle = parent.run(None, client=client)
    assert handle.result(10) == 42
    key = client.keys.idempotency("child", step_workflow_idempotency_key(handle.id, "double", "child"), "default")
    child_id = r.get(key)
    child_run = client.get_run(child_id)
    assert child_run.status == "succeeded" and child_run.output == 42 and child_run.parent_run_id == handle.id
    assert client.list_children(handle.id) == [child_id] and client.list_children(child_id) == []


def test_a_single_slot_worker_runs_its_own_child_inline_without_deadlock(start, registry, client):
    @define_workflow("leaf", registry=registry)
    def leaf(ctx):
        return "leaf"

    @define_workflow("middle", registry=registry)
    def middle(ctx):
        return ctx.step.run_workflow("leaf", leaf) + "+middle"

    @define_workflow("root", registry=registry)
    def root(ctx):
        return ctx.step.run_workflow("middle", "middle") + "+root"

    start(concurrency=1)
    began = time.monotonic()
    assert root.run(None, client=client).result(10) == "leaf+middle+root"
    assert time.monotonic() - began < 3


def test_a_failed_child_fails_the_parent_step(start, registry, client):
    @define_workflow("bad-child", max_attempts=1, registry=registry)
    def bad_child(ctx):
        raise ValueError("child broke")

    @define_workflow("sad-parent", max_attempts=1, registry=registry)
    def sad_parent(ctx):
        return ctx.step.run_workflow("kid", "bad-child")

    start(concurrency=1)
    with pytest.raises(RunFailedError, match="child broke"):
        sad_parent.run(None, client=client).result(10)


def test_a_canceled_child_cancels_the_parent(start, registry, client):
    @define_workflow("sleepy-child", registry=registry)
    def sleepy_child(ctx):
        gevent.sleep(30)

    @define_workflow("waiting-parent", registry=registry)
    def waiting_parent(ctx):
        return ctx.step.run_workflow("kid", "sleepy-child", result_timeout=20)

    start(concurrency=2)
    handle = waiting_parent.run(None, client=client)
    kid = wait_until(lambda: [x for x in client.list_runs(workflow="sleepy-child") if x.status == "running"])
    client.cancel(kid[0].id)
    with pytest.raises(CanceledError):
        handle.result(10)


def test_a_retried_parent_reuses_its_succeeded_child(start, registry, client, r, prefix):
    @define_workflow("once-child", registry=registry)
    def once_child(ctx):
        return bump(r, prefix, "child")

    @define_workflow("retry-parent", max_attempts=2, registry=registry)
    def retry_parent(ctx):
        value = ctx.step.run_workflow("kid", "once-child")
        if ctx.run.attempt == 1:
            raise ValueError("parent fails after its child")
        return value

    start(concurrency=2)
    handle = retry_parent.run(None, client=client)
    assert handle.result(10) == 1
    assert count(r, prefix, "child") == 1
    # the retried step found the child its idempotency key names: still one child listed
    (child_id,) = client.list_children(handle.id)
    assert r.zcard(client.keys.run_children(handle.id, "default")) == 1 and client.get_run(child_id).parent_run_id == handle.id


# 10. event steps -----------------------------------------------------------------


def test_emit_and_schedule_event_steps_emit_once_per_run(start, registry, client, r, prefix):
    @define_workflow("on-signup", events=["user.signup"], registry=registry)
    def on_signup(ctx):
        bump(r, prefix, "signup")
        return ctx.input

    @define_workflow("emitter", max_attempts=2, registry=registry)
    def emitter(ctx):
        now_ids = ctx.step.emit_event("announce", "user.signup", {"id": 1})
        later_ids = ctx.step.schedule_event("remind", "user.signup", {"id": 2}, at=time.time() + 3600)
        if ctx.run.attempt == 1:
            raise ValueError("fail after emitting")
        return [now_ids, later_ids]

    start(concurrency=2)
    handle = emitter.run(None, client=client)
    now_ids, later_ids = handle.result(10)
    assert len(now_ids) == 1 and len(later_ids) == 1
    wait_until(lambda: count(r, prefix, "signup") == 1)
    gevent.sleep(0.3)
    assert count(r, prefix, "signup") == 1  # the retried parent did not emit again
    assert client.get_run(later_ids[0]).status == "scheduled"
    key = client.keys.idempotency("on-signup", _event_key(handle.id, "announce", "user.signup"), "default")
    assert r.get(key) == now_ids[0]


def _event_key(run_id, step, event):
    from redflow.core.idempotency import event_run_idempotency_key

    return event_run_idempotency_key(event, step_event_idempotency_key(run_id, step, event))


def test_retrying_a_failed_run_resumes_after_its_succeeded_steps(start, registry, client, r, prefix):
    @define_workflow("resumable", max_attempts=1, registry=registry)
    def resumable(ctx):
        ctx.step.run("expensive", lambda: bump(r, prefix, "expensive"))
        if not r.get(f"{prefix}:fixed"):
            raise ValueError("downstream is broken")
        return "done"

    start()
    handle = resumable.run(None, client=client)
    with pytest.raises(RunFailedError):
        handle.result(5)
    r.set(f"{prefix}:fixed", "1")
    assert client.retry(handle.id) is True
    assert handle.result(5) == "done"
    run = client.get_run(handle.id)
    assert run.attempt == 2 and run.max_attempts == 2 and run.error is None
    assert count(r, prefix, "expensive") == 1
    assert client.retry(handle.id) is False  # succeeded runs are not retried
    assert client.retry("run_missing") is False


def test_a_step_raising_a_base_exception_is_recorded_failed(start, registry, client):
    import gevent

    @define_workflow("base-step", max_attempts=1, registry=registry)
    def base_step(ctx):
        ctx.step.run("timer", lambda: _raise(gevent.Timeout(0.01)))

    start()
    handle = base_step.run(None, client=client)
    with pytest.raises(RunFailedError, match="Timeout"):
        handle.result(5)
    (step,) = client.get_steps(handle.id)
    assert step.status == "failed" and step.error["name"] == "Timeout"
