"""Changing a workflow's code while runs of it wait (docs/guide/code-changes.md).

Each test parks a run under one version of a workflow (v1, a worker with
its own Registry), stops that worker, replaces the code (a new Registry
with a handler of the same name, on a new worker), and lets the run resume:
the assertions are what the page says happens. Executions are counted by
the step functions themselves; nothing here asserts on speed.
"""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import wait_until

from redflow import Registry, RunFailedError, define_workflow


@pytest.fixture
def calls():
    return Counter()


def counted(calls, name, value=None):
    """A step function that counts its calls under ``name`` and returns ``value``."""

    def fn():
        calls[name] += 1
        return value

    return fn


def parked_in(client, run_id, step):
    run = client.get_run(run_id)
    return run is not None and run.status == "scheduled" and run.parked_step == step


def replace_code(worker, start, registry):
    """Stop the old version's worker and start one with the new code."""
    worker.stop(timeout=5)
    return start(registry)


def test_a_run_sleeping_through_a_deploy_resumes_with_its_steps_matched_by_name(start, registry, client, calls):
    @define_workflow("order", registry=registry)
    def order_v1(ctx):
        kept = ctx.step.run("kept", counted(calls, "v1 kept", {"n": 1}))
        ctx.step.run("renamed", counted(calls, "v1 renamed"))
        ctx.step.run("removed", counted(calls, "v1 removed"))
        ctx.step.sleep("nap", 2.0)  # the v1 worker is stopped before it wakes
        ctx.step.run("after", counted(calls, "v1 after"))
        return {"kept": kept}

    v2 = Registry()

    @define_workflow("order", registry=v2)
    def order_v2(ctx):
        kept = ctx.step.run("kept", counted(calls, "v2 kept", [1]))  # a new output shape
        ctx.step.run("renamed-v2", counted(calls, "v2 renamed"))
        ctx.step.run("added", counted(calls, "v2 added"))  # new, before the sleep
        ctx.step.sleep("nap", 3600.0)  # a new duration: the stored wake time stands
        ctx.step.run("after", counted(calls, "v2 after"))
        return {"kept": kept, "attempt": ctx.run.attempt}

    v1_worker = start()
    handle = client.run("order", {})
    wait_until(lambda: parked_in(client, handle.id, "nap"), message="the run to sleep")
    replace_code(v1_worker, start, v2)

    output = handle.result(timeout=30)
    assert calls["v1 after"] == 0, "the v1 worker resumed the run before it was stopped: the machine stalled for 2 s"
    assert output == {"kept": {"n": 1}, "attempt": 1}  # the output as stored, not v2's shape; a resume is no retry
    assert calls == Counter({"v1 kept": 1, "v1 renamed": 1, "v1 removed": 1, "v2 renamed": 1, "v2 added": 1, "v2 after": 1})
    steps = {step.name: step.status for step in client.get_steps(handle.id)}
    # the records of the renamed and the removed steps stay, and nothing reads them
    assert steps == dict.fromkeys(["kept", "renamed", "removed", "nap", "renamed-v2", "added", "after"], "succeeded")


def test_a_run_waiting_for_an_event_keeps_the_wait_it_stored(start, registry, client, calls):
    @define_workflow("approve", registry=registry)
    def approve_v1(ctx):
        return ctx.step.wait_for_event("approval", "order.approved", match={"order": 7})

    v2 = Registry()

    @define_workflow("approve", registry=v2)
    def approve_v2(ctx):
        calls["v2"] += 1
        return ctx.step.wait_for_event("approval", "order.accepted", match={"order": 8})  # changed event and match

    v1_worker = start()
    handle = client.run("approve", {})
    wait_until(lambda: parked_in(client, handle.id, "approval"), message="the run to wait")
    replace_code(v1_worker, start, v2)

    client.emit_event("order.accepted", {"order": 8})  # what v2 waits for: the stored wait is v1's
    assert parked_in(client, handle.id, "approval") and calls["v2"] == 0
    client.emit_event("order.approved", {"order": 7, "by": "ada"})
    assert handle.result(timeout=10) == {"order": 7, "by": "ada"}
    assert calls["v2"] == 1  # v2's handler ran once, and its wait step replayed the delivered payload


def test_renaming_a_wait_step_makes_a_waiting_run_wait_again(start, registry, client):
    @define_workflow("approve", registry=registry)
    def approve_v1(ctx):
        return ctx.step.wait_for_event("approval", "order.approved")

    v2 = Registry()

    @define_workflow("approve", registry=v2)
    def approve_v2(ctx):
        return ctx.step.wait_for_event("approval-v2", "order.approved")

    v1_worker = start()
    handle = client.run("approve", {})
    wait_until(lambda: parked_in(client, handle.id, "approval"), message="the run to wait")
    replace_code(v1_worker, start, v2)

    client.emit_event("order.approved", {"n": 1})  # resolves v1's step, which v2 no longer has
    wait_until(lambda: parked_in(client, handle.id, "approval-v2"), message="the run to wait in the renamed step")
    client.emit_event("order.approved", {"n": 2})
    assert handle.result(timeout=10) == {"n": 2}
    assert {step.name: step.output for step in client.get_steps(handle.id)} == {"approval": {"n": 1}, "approval-v2": {"n": 2}}


def test_a_version_recorded_in_an_early_step_keeps_old_runs_on_the_old_path(start, registry, client, calls):
    @define_workflow("ship", registry=registry)
    def ship_v1(ctx):
        ctx.step.run("code-version", lambda: 1)
        ctx.step.wait_for_event("packed", "order.packed", match={"order": ctx.input["order"]})
        return ctx.step.run("ship", counted(calls, "ship by post", "post"))

    v2 = Registry()

    @define_workflow("ship", registry=v2)
    def ship_v2(ctx):
        version = ctx.step.run("code-version", lambda: 2)
        ctx.step.wait_for_event("packed", "order.packed", match={"order": ctx.input["order"]})
        if version >= 2:
            return ctx.step.run("ship-by-courier", counted(calls, "ship by courier", "courier"))
        return ctx.step.run("ship", counted(calls, "ship by post", "post"))

    v1_worker = start()
    old = client.run("ship", {"order": 1})
    wait_until(lambda: parked_in(client, old.id, "packed"), message="the v1 run to wait")
    replace_code(v1_worker, start, v2)
    new = client.run("ship", {"order": 2})
    wait_until(lambda: parked_in(client, new.id, "packed"), message="the v2 run to wait")

    client.emit_event("order.packed", {"order": 1})
    client.emit_event("order.packed", {"order": 2})
    assert (old.result(timeout=10), new.result(timeout=10)) == ("post", "courier")
    assert calls == Counter({"ship by post": 1, "ship by courier": 1})


def test_a_stricter_schema_fails_a_run_that_waited_under_the_old_one(start, registry, client, calls):
    @define_workflow("charge", registry=registry)
    def charge_v1(ctx):
        return ctx.step.wait_for_event("approval", "charge.approved")

    def needs_currency(value):
        if "currency" not in value:
            raise ValueError("currency is required")
        return value

    v2 = Registry()

    @define_workflow("charge", registry=v2, schema=needs_currency, on_failure=lambda ctx: calls.update(["on_failure"]))
    def charge_v2(ctx):
        return ctx.step.wait_for_event("approval", "charge.approved")

    v1_worker = start()
    handle = client.run("charge", {"amount": 5})
    wait_until(lambda: parked_in(client, handle.id, "approval"), message="the run to wait")
    replace_code(v1_worker, start, v2)

    client.emit_event("charge.approved", {})
    with pytest.raises(RunFailedError, match="currency is required"):
        handle.result(timeout=10)
    run = client.get_run(handle.id)
    assert (run.error["name"], run.attempt) == ("InputValidationError", 1)  # not retried
    assert calls["on_failure"] == 1


def test_a_worker_without_the_workflow_fails_its_waiting_runs(start, registry, client):
    @define_workflow("legacy", registry=registry)
    def legacy(ctx):
        return ctx.step.wait_for_event("approval", "legacy.approved")

    v2 = Registry()

    @define_workflow("successor", registry=v2)  # the same queue, "default"; "legacy" is gone
    def successor(ctx):
        return None

    v1_worker = start()
    handle = client.run("legacy", {})
    wait_until(lambda: parked_in(client, handle.id, "approval"), message="the run to wait")
    replace_code(v1_worker, start, v2)

    client.emit_event("legacy.approved", {})
    with pytest.raises(RunFailedError, match="Unknown workflow: 'legacy'"):
        handle.result(timeout=10)
    assert client.get_run(handle.id).attempt == 1  # not retried


def test_a_waiting_run_keeps_its_queue_when_its_workflow_moves(start, registry, client):
    @define_workflow("report", registry=registry)  # queue "default"
    def report_v1(ctx):
        return ctx.step.wait_for_event("data", "report.data")

    v2 = Registry()

    @define_workflow("report", registry=v2, queue="reports")
    def report_v2(ctx):
        return {"data": ctx.step.wait_for_event("data", "report.data"), "queue": ctx.run.queue}

    v1_worker = start()
    handle = client.run("report", {})
    wait_until(lambda: parked_in(client, handle.id, "data"), message="the run to wait")
    v1_worker.stop(timeout=5)
    start(v2, queues=["reports", "default"])  # v2 moved the workflow: keep serving the old queue until it drains

    client.emit_event("report.data", {"rows": 3})
    assert handle.result(timeout=10) == {"data": {"rows": 3}, "queue": "default"}
