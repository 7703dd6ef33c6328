"""Interop with the asyncio ``redflow`` 0.1.x on Redis Cluster: an app-scoped
queue (``shop:reports`` becomes the hash tag ``{q:shop:reports}``), payloads by
reference, array step records and the terminal stream, whose keys the scripts
build from the run key (``:blobs``, ``:terminal``): one slot, no CROSSSLOT."""

from redis.crc import key_slot
from test_cluster import _Recorder

from redflow import create_client, define_workflow
from redflow.core.keys import Keys
from redflow.store.requests import EnqueueRequest, SettleRequest
from redflow.store.scripts import Scripts, run_own_keys

BIG = {"text": "z" * 3000}


def test_the_scripts_that_write_blobs_touch_keys_of_one_slot_of_an_app_scoped_queue():
    rec = _Recorder()
    keys = Keys("redflow:v1", cluster=True)
    scripts = Scripts(rec, keys)
    queue = "shop:reports"
    scripts.enqueue_run(
        EnqueueRequest("wf", queue, "@blob:v1:a", 3, input_blob=("v1:a", "{}"), mark_parent=True), run_id="run_1", created_at_ms=1
    )
    scripts.settle_run(SettleRequest("run_1", queue, "succeeded", "t", 1000, 1, output_json="@blob:v1:b", blob=("v1:b", "{}")))
    scripts.save_step(
        run_id="run_1", queue=queue, token="t", name="s", step_json='[1,1,1,"@blob:v1:c"]', lease_ms=1000, blob=("v1:c", "{}")
    )
    scripts.cancel_run(run_id="run_1", queue=queue, now_ms=1, reason="", error_json="")
    scripts.retry_run(run_id="run_1", queue=queue, now_ms=1)
    calls = [*rec.calls, run_own_keys(keys, "run_1", queue)]
    for touched in calls:
        assert len({key_slot(k.encode()) for k in touched}) == 1, touched
    assert keys.run_blobs("run_1", queue).startswith("redflow:v1:{q:shop:reports}:")


def test_an_app_scoped_compat_run_with_large_payloads_runs_and_is_purged_whole(start, registry, redis_url, prefix, r):
    @define_workflow("report", queue="reports", registry=registry)
    def report(ctx):
        part = ctx.step.run("part", lambda: BIG)
        return {"input": ctx.input, "part": part}

    start(app="shop", compat="redflow-0.1")
    with create_client(redis_url, prefix=prefix, registry=registry, app="shop", compat="redflow-0.1") as shop:
        handle = report.run(BIG, client=shop)
        assert handle.result(15) == {"input": BIG, "part": BIG}
        keys, queue = shop.keys, "shop:reports"
        run = r.hgetall(keys.run(handle.id, queue))
        assert run["queue"] == queue and run["inputJson"].startswith("@blob:") and run["outputJson"].startswith("@blob:")
        assert r.hget(keys.run_steps(handle.id, queue), "part").startswith("[1,1,1,")
        assert [fields["status"] for _, fields in r.xrange(keys.run_terminal(handle.id, queue))] == ["succeeded"]
        assert shop.get_steps(handle.id)[0].output == BIG
        assert shop.purge(older_than=0) == 1
        assert r.exists(*(key for key in run_own_keys(keys, handle.id, queue))) == 0
