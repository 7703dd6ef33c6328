"""Singleton and debounce on a cluster: the key or window lives in its run's queue slot
(``{q:<queue>}``), so the enqueue script touches one slot; queues on two masters each
keep their own one run per key, and every way a run ends lets go of it there."""

import gevent
from gevent.event import Event

from redflow import Debounce, Singleton, define_workflow


def test_one_run_per_key_in_each_queue_on_distinct_masters(redis_cluster, registry, client, start, r):
    first, second = redis_cluster.queues_on_distinct_masters(client.keys, 2)

    @define_workflow("unique", registry=registry, queue=first, singleton=Singleton(key=lambda i: i["k"]))
    def unique(ctx):
        return ctx.input["n"]

    @define_workflow("quiet", registry=registry, queue=second, debounce=Debounce(period=0.2, key=lambda i: i["k"]))
    def quiet(ctx):
        return ctx.input["n"]

    gate = Event()

    def call(workflow, n):
        gate.wait()
        return workflow.run({"k": "x", "n": n}, client=client, **({"delay": 60} if workflow is unique else {})).id

    greenlets = [gevent.spawn(call, wf, n) for wf in (unique, quiet) for n in range(10)]
    gevent.sleep(0)
    gate.set()
    ids = [g.get(timeout=15) for g in greenlets]
    assert len(set(ids[:10])) == 1 and len(set(ids[10:])) == 1
    held, collapsed = ids[0], ids[10]
    assert r.get(client.keys.singleton("unique", "x", first)) == held
    assert client.get_run(held).skipped_calls == 9 and client.get_run(collapsed).collapsed_calls == 9
    start(concurrency=2, queues=[first, second])
    assert client.wait_for(collapsed, timeout=15).outcome() in range(10)
    assert r.get(client.keys.debounce("quiet", "x", second)) is None
    assert client.cancel(held)
    assert r.get(client.keys.singleton("unique", "x", first)) is None
    again = unique.run({"k": "x", "n": 99}, client=client)
    assert again.id != held and again.result(15) == 99
    assert r.get(client.keys.singleton("unique", "x", first)) is None
