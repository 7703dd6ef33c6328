"""Children on another master than their parent (another hash slot): a cancel
of the parent and the children's creation cannot be one atomic step, so their
order is what keeps every child from running on (engine/fence.py)."""

import pytest
from helpers import wait_until
from test_stale_attempts import all_canceled, bump, count, start_children_late

from redflow import define_workflow


@pytest.mark.parametrize("frozen", [False, True], ids=["creator-goes-on", "keeper-reports-the-lease-lost-meanwhile"])
def test_children_on_another_master_started_just_after_their_parent_was_canceled_are_all_canceled(
    redis_cluster, registry, client, start, r, prefix, monkeypatch, frozen
):
    parents, kids = redis_cluster.queues_on_distinct_masters(client.keys, 2)
    start_children_late(monkeypatch, client, r, frozen=frozen)

    @define_workflow("kid", registry=registry, queue=kids)
    def kid(ctx):
        bump(r, prefix, "kid")
        ctx.step.run("hold", lambda signal: signal.wait(60))
        bump(r, prefix, "kid-finished")

    @define_workflow("parent", registry=registry, queue=parents)
    def parent(ctx):
        return ctx.step.run_workflows("fan-out", "kid", [{"i": i} for i in range(5)])

    start(concurrency=2, queues=[parents])
    start(concurrency=6, queues=[kids])
    handle = parent.run(None, client=client)
    wait_until(lambda: len(client.list_children(handle.id)) == 5, timeout=15, message="the children started")
    children = client.list_children(handle.id)
    assert {client.queue_of(c) for c in children} == {kids}
    wait_until(lambda: all_canceled(client, children), timeout=15, message="every child canceled")
    assert count(r, prefix, "kid-finished") == 0 and client.get_run(handle.id).status == "canceled"
