"""Deadlines on a cluster: a run failed by its timeout on one master cancels its
children on another (the cancel cascade reaches them by their queue's slot)."""

import pytest
from helpers import wait_until

from redflow import RunFailedError, define_workflow


def test_a_parent_past_its_timeout_cancels_its_children_on_another_master(redis_cluster, registry, client, start):
    parents, kids = redis_cluster.queues_on_distinct_masters(client.keys, 2)

    @define_workflow("kid", registry=registry, queue=kids)
    def kid(ctx):
        ctx.step.run("hold", lambda signal: signal.wait(60))

    @define_workflow("parent", registry=registry, queue=parents, timeout=1.0)
    def parent(ctx):
        return ctx.step.run_workflows("fan-out", "kid", [{"i": i} for i in range(3)])

    start(concurrency=2, queues=[parents])
    start(concurrency=4, queues=[kids])
    handle = parent.run(None, client=client)
    with pytest.raises(RunFailedError) as failed:
        handle.result(15)
    assert failed.value.error["name"] == "DeadlineExceededError"
    children = client.list_children(handle.id)
    assert len(children) == 3 and {client.queue_of(c) for c in children} == {kids}
    wait_until(lambda: all(client.get_run(c).status == "canceled" for c in children), timeout=15, message="every child canceled")
    assert client.get_run(handle.id).deadline_exceeded == "timeout"
