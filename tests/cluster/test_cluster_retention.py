"""Retention and purge on Redis Cluster: per-queue indexes, the purge script
in one slot, and the run-queues directory cleaned after the run."""

import time

from helpers import wait_until
from redis.crc import key_slot
from test_cluster import _Recorder

from redflow import define_workflow
from redflow.core.keys import Keys
from redflow.core.retention import DEFAULT_RETENTION
from redflow.engine.retention import RetentionCleaner
from redflow.store.scripts import Scripts, run_own_keys


def test_the_purge_script_touches_keys_of_one_slot():
    rec = _Recorder()
    scripts = Scripts(rec, Keys("redflow:v1", cluster=True))
    scripts.purge_run(run_id="run_1", queue="emails", workflow="wf", finished_at="1", tags={"customer": "42"})
    (keys,) = rec.calls
    # the run's own keys; created, 3 status, the held children and workflow-runs; per tag, workflow+tag;
    # failed/canceled per workflow and per tag
    own = len(run_own_keys(Keys("redflow:v1", cluster=True), "run_1", "emails"))
    assert len(keys) == own + 6 + 2 + 4 and len({key_slot(k.encode()) for k in keys}) == 1


def test_finished_runs_of_every_queue_leave_with_their_run_queues_entry(start, client, registry, r):
    @define_workflow("east", queue="east", retention=1, registry=registry)
    def east(ctx):
        return ctx.step.run("s", lambda: 1)

    @define_workflow("west", queue="west", registry=registry)
    def west(ctx):
        return None

    start(retention_interval_s=0.1)
    kept = [west.run(None, client=client) for _ in range(5)]
    for h in kept:
        h.result(10)
    brief = [east.run(None, client=client) for _ in range(5)]
    wait_until(lambda: all(r.hget(client.keys.run(h.id, "east"), "status") in ("succeeded", None) for h in brief), timeout=15)
    k = client.keys
    wait_until(lambda: r.zcard(k.workflow_runs("east", "east")) == 0, timeout=15)
    for h in brief:
        assert client.get_run(h.id) is None and r.hget(k.run_queues(), h.id) is None
        assert r.exists(k.run_steps(h.id, "east")) == 0 and r.zscore(k.runs_created("east"), h.id) is None
    assert all(r.hget(k.run_queues(), h.id) == "west" for h in kept)
    assert client.purge(older_than=0, workflow="west") == 5
    assert client.list_runs(limit=50) == [] and r.hlen(k.run_queues()) == 0


def test_children_on_another_slot_stay_while_their_parent_waits_then_follow_their_retention(start, client, registry, r):
    """The parent's hash is on another master than its children's: the cleaner
    reads it there (from the child's ``notifyParent``, or ``run-queues`` for a
    ``run_workflow`` child) before it deletes a child."""

    @define_workflow("west-kid", queue="west", retention=0.001, registry=registry)
    def west_kid(ctx):
        if ctx.input == 0:
            ctx.step.wait_for_event("hold", "west.release")
        return ctx.input

    @define_workflow("east-parent", queue="east", retention=None, registry=registry)
    def east_parent(ctx):
        first = ctx.step.run_workflow("one", "west-kid", 5)
        return [first, *ctx.step.run_workflows("many", "west-kid", [0, 1, 2])]

    k = client.keys
    assert key_slot(k.run("x", "east").encode()) != key_slot(k.run("x", "west").encode())
    start(queues=["east", "west"], clean_retention=False)
    handle = east_parent.run(None, client=client)
    wait_until(lambda: len(client.list_children(handle.id)) == 4, timeout=20)
    children = client.list_children(handle.id)
    wait_until(lambda: sorted(client.get_run(c).status for c in children) == ["scheduled", *["succeeded"] * 3], timeout=20)
    time.sleep(0.01)  # past the children's retention
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
    for _ in range(3):
        cleaner.step()
    assert client.purge(older_than=0) == 0
    assert all(client.get_run(c) is not None for c in children) and cleaner.purged == 0
    assert r.zcard(k.retention_held("west")) == 3

    client.emit_event("west.release")
    assert handle.result(20) == [5, 0, 1, 2]
    deadline = time.monotonic() + 20
    while any(client.get_run(c) is not None for c in children):
        assert time.monotonic() < deadline, "the children stayed after their parent ended"
        cleaner.step()
        time.sleep(0.05)
    assert r.zcard(k.retention_held("west")) == 0 and all(r.hget(k.run_queues(), c) is None for c in children)
    cleaner.stop()
