"""Signals and emit_workflow on Redis Cluster: a signal is stored and a parked
waiter woken in one script on the run's slot, a park sees a signal sent
meanwhile (its signals key is the run key + a suffix), and a run emitted on
another master is memoized and left alone by a cancel of its parent."""

from helpers import wait_until

from redflow import define_workflow


def test_signals_reach_runs_on_several_masters_before_and_after_they_wait(redis_cluster, registry, client, start, r):
    queues = redis_cluster.queues_on_distinct_masters(client.keys, 2)
    for queue in queues:

        @define_workflow(f"approver-{queue}", queue=queue, registry=registry)
        def approver(ctx):
            return [ctx.step.wait_for_signal("approve"), ctx.step.wait_for_signal("approve", timeout=60)]

    early = [client.run(f"approver-{queue}", None, delay=3600) for queue in queues]
    for handle in early:
        assert client.signal(handle.id, "approve", "early")
        r.zadd(client.keys.queue_scheduled(client.queue_of(handle.id)), {handle.id: 0})
    start(concurrency=4)
    for handle in early:
        wait_until(lambda h=handle: client.get_run(h.id).parked_step == "signal:approve#2", message="the second wait to park")
        assert client.signal(handle.id, "approve", "late")
    assert [handle.result(10) for handle in early] == [["early", "late"]] * 2
    assert client.signal(early[0].id, "approve", "too late") is False and client.signal("run_missing", "approve", 1) is False
    assert all(r.exists(client.keys.run_signals(h.id, client.queue_of(h.id))) == 0 for h in early)


def test_an_emitted_run_on_another_master_is_started_once_and_outlives_a_cancel_of_its_parent(redis_cluster, registry, client, start):
    parents, mails = redis_cluster.queues_on_distinct_masters(client.keys, 2)

    @define_workflow("mail", queue=mails, registry=registry)
    def mail(ctx):
        return ctx.step.wait_for_signal("go")

    @define_workflow("order", queue=parents, registry=registry, max_attempts=2)
    def order(ctx):
        ctx.step.emit_workflow("mail", "mail", {"to": "a@b"})
        if ctx.run.attempt == 1:
            raise ConnectionError("the first attempt fails after the emit")
        ctx.step.wait_for_signal("never")

    start(concurrency=4)
    handle = order.run(None, client=client, tags={"customer": "42"})
    wait_until(lambda: client.get_run(handle.id).parked_step == "signal:never", message="the parent's second attempt to wait")
    emitted = [run.id for run in client.list_runs(workflow="mail")]
    assert len(emitted) == 1 and client.queue_of(emitted[0]) == mails
    assert client.get_run(emitted[0]).parent_run_id == handle.id and client.get_run(emitted[0]).tags == {"customer": "42"}
    assert client.cancel(handle.id) and client.get_run(handle.id).status == "canceled"
    assert client.signal(emitted[0], "go", "sent")
    assert client.get_handle(emitted[0]).result(10) == "sent"
