"""``ctx.step.emit_workflow`` (issue 31 item 3): a run started without waiting for it,
memoized as the step's output, on a real redis-server with in-process workers.

Invariants (docs/guide/steps.md, "Starting a run without waiting"):
- a step ``emit_workflow`` starts at most one run per parent run, however often
  the parent replays it (a retry, a resume, an attempt lost after the start and
  before the step's record): the key names the run whatever became of it;
- the emitted run is linked to its parent (``parent_run_id``) but is not its
  child for the cancel cascade: canceling the parent leaves it alone;
- it is filed under the parent's tags, its own winning.
"""

from __future__ import annotations

import pytest
import redis
from helpers import wait_until

from redflow import NonRetryableError, RedflowError, define_workflow
from redflow.core import codec
from redflow.store.scripts import Scripts


def runs_of(client, workflow):
    return [run.id for run in client.list_runs(workflow=workflow, limit=100)]


@pytest.fixture
def notify(registry, r, prefix):
    """A workflow that counts itself and fails when asked (no retry); it waits for
    signal ``go`` first when its input says ``wait``."""

    @define_workflow("notify", registry=registry, max_attempts=1)
    def notify_workflow(ctx):
        r.incr(f"{prefix}:count:notify")
        if ctx.input.get("wait"):
            ctx.step.wait_for_signal("go")
        if ctx.input.get("fail"):
            raise NonRetryableError("the mail server said no")
        return {"to": ctx.input["to"]}

    return notify_workflow


def test_the_parent_gets_the_runs_id_without_waiting_and_the_run_is_linked_to_it(start, registry, client, notify, r, prefix):
    @define_workflow("order", registry=registry)
    def order(ctx):
        sent = ctx.step.emit_workflow("notify", notify, {"to": "a@b", "wait": True}, tags={"kind": "mail"})
        return {"notify": sent}

    start()
    parent = order.run(None, client=client, tags={"customer": "42", "kind": "order"})
    child_id = parent.result(10)["notify"]  # the parent ended; the child still waits for its signal
    child = client.get_run(child_id)
    assert child.workflow == "notify" and child.status in ("queued", "running", "scheduled")
    assert child.parent_run_id == parent.id and child.tags == {"customer": "42", "kind": "mail"}
    assert client.list_children(parent.id) == []  # not among its children: a cancel leaves it alone
    assert [s.output for s in client.get_steps(parent.id)] == [child_id]
    assert client.signal(child_id, "go")
    assert client.get_handle(child_id).result(10) == {"to": "a@b"}


def test_a_retried_parent_replays_the_id_and_starts_no_second_run(start, registry, client, notify, r, prefix):
    @define_workflow("order", registry=registry, max_attempts=3)
    def order(ctx):
        sent = ctx.step.emit_workflow("notify", "notify", {"to": "a@b"})
        if ctx.run.attempt < 3:
            raise ConnectionError("the parent fails after the emit")
        return sent

    start()
    parent = order.run(None, client=client)
    child_id = parent.result(10)
    assert client.get_run(parent.id).attempt == 3
    assert runs_of(client, "notify") == [child_id]
    assert client.get_handle(child_id).result(10) == {"to": "a@b"} and int(r.get(f"{prefix}:count:notify")) == 1


def test_an_attempt_lost_between_the_start_and_the_record_starts_none_again_even_if_that_run_failed(
    start, registry, client, notify, r, prefix, monkeypatch
):
    @define_workflow("order", registry=registry)
    def order(ctx):
        return ctx.step.emit_workflow("notify", "notify", {"to": "a@b", "fail": True})

    real = Scripts.save_step
    lost: list[str] = []

    def record_lost_once(self, **kwargs):
        if kwargs["name"] == "notify" and not lost:  # the run is started: let it fail, then lose this record
            lost.append(codec.loads(codec.loads(kwargs["step_json"])["outputJson"]))
            wait_until(lambda: client.get_run(lost[0]).status == "failed", message="the emitted run to fail")
            raise redis.ConnectionError("Redis went away before the step's record")
        return real(self, **kwargs)

    monkeypatch.setattr(Scripts, "save_step", record_lost_once)
    start(concurrency=2, lease_ms=500)
    parent = order.run(None, client=client)
    assert parent.result(20) == lost[0]  # the replay got the failed run's id back: no second start
    assert runs_of(client, "notify") == lost and int(r.get(f"{prefix}:count:notify")) == 1


def test_canceling_the_parent_leaves_the_emitted_run_alone(start, registry, client, notify):
    @define_workflow("order", registry=registry)
    def order(ctx):
        ctx.step.emit_workflow("notify", "notify", {"to": "a@b", "wait": True})
        ctx.step.wait_for_signal("never")

    start()
    parent = order.run(None, client=client)
    wait_until(lambda: client.get_run(parent.id).parked_for == "signal" and len(runs_of(client, "notify")) == 1)
    child_id = runs_of(client, "notify")[0]
    assert client.cancel(parent.id)
    assert client.get_run(parent.id).status == "canceled"
    assert client.get_run(child_id).status != "canceled"
    assert client.signal(child_id, "go")
    assert client.get_handle(child_id).result(10) == {"to": "a@b"}


def test_bad_emit_arguments_are_clear_errors_before_anything_starts(start, registry, client, notify):
    @define_workflow("order", registry=registry, max_attempts=1)
    def order(ctx):
        kind = ctx.input
        if kind == "both":
            ctx.step.emit_workflow("notify", "notify", {"to": "a"}, delay=1, run_at=2)
        elif kind == "tags":
            ctx.step.emit_workflow("notify", "notify", {"to": "a"}, tags={"": "x"})
        elif kind == "unknown":
            ctx.step.emit_workflow("notify", "nobody", {"to": "a"})
        return kind

    start()
    for kind, message in (("both", "give delay= or run_at=, not both"), ("tags", "tag key"), ("unknown", "Unknown workflow: 'nobody'")):
        with pytest.raises(RedflowError, match=message):
            order.run(kind, client=client).result(10)
    assert runs_of(client, "notify") == []


def test_a_delayed_emit_starts_the_run_later(start, registry, client, notify):
    @define_workflow("order", registry=registry)
    def order(ctx):
        return ctx.step.emit_workflow("notify", "notify", {"to": "a@b"}, delay=3600, priority=3)

    start()
    child = client.get_run(order.run(None, client=client).result(10))
    assert child.status == "scheduled" and child.available_at is not None and child.available_at > child.created_at + 3500
