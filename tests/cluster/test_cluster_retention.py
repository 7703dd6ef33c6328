"""Retention and purge on Redis Cluster: per-queue indexes, the purge script
in one slot, and the run-queues directory cleaned after the run."""

from helpers import wait_until
from redis.crc import key_slot
from test_cluster import _Recorder

from redflow import define_workflow
from redflow.core.keys import Keys
from redflow.store.scripts import Scripts


def test_the_purge_script_touches_keys_of_one_slot():
    rec = _Recorder()
    scripts = Scripts(rec, Keys("redflow:v1", cluster=True))
    scripts.purge_run(run_id="run_1", queue="emails", workflow="wf", finished_at="1", tags={"customer": "42"})
    (keys,) = rec.calls
    # the run's 6 keys; created, 3 status and workflow-runs; per tag, workflow+tag; failed/canceled per workflow and per tag
    assert len(keys) == 6 + 5 + 2 + 4 and len({key_slot(k.encode()) for k in keys}) == 1


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
