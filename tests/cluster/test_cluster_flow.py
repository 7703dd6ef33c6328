"""Flow control on Redis Cluster: limits, held runs, priorities and the limits
sweeper work with every key of a run's queue in one slot (the queue's tag)."""

from gevent.event import Event
from helpers import wait_until

from redflow import Concurrency, RateLimit, define_workflow
from redflow.engine.limits import FlowSweeper
from redflow.ops.views.flow import flow_rows


def test_limits_and_priorities_hold_on_a_cluster(redis_cluster, registry, client, start, r):
    queue = redis_cluster.queues_on_distinct_masters(client.keys)[1]
    gate, running, peak = Event(), [], [0]

    @define_workflow("capped", queue=queue, registry=registry,
                     concurrency=[Concurrency(limit=2), Concurrency(limit=1, key=lambda i: i["c"])],
                     rate_limit=RateLimit(limit=1000, period=1))  # fmt: skip
    def capped(ctx):
        running.append(ctx.run.id)
        peak[0] = max(peak[0], len(running))
        gate.wait(30)
        running.remove(ctx.run.id)
        return ctx.input["c"]

    worker = start(concurrency=6)
    handles = [client.run(capped, {"c": c}) for c in "aabbc"]
    wait_until(lambda: r.scard(client.keys.limit_waiting("capped", queue)) == 3 and len(running) == 2)
    urgent = client.run(capped, {"c": "d"}, priority=9)  # held too: two run already
    wait_until(lambda: [(f.running, f.limit, f.held) for f in flow_rows(client)] == [(2, 2, 4)])
    worker.flow_sweeper.step()  # heals with the queue's keys: nothing to change
    FlowSweeper(client.store, [queue], interval_s=0.01).step()
    gate.set()
    assert sorted(h.result(10) for h in [*handles, urgent]) == sorted("aabbcd")
    assert peak[0] == 2
    assert r.get(client.keys.workflow_running("capped", queue)) == "0"
