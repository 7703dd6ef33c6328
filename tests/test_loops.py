"""Promoter, reaper, cron scheduler and loop resilience (issue 4, behaviours 12-15)."""

import logging
import resource
import time

import gevent
import pytest
from helpers import wait_until

from redflow import create_client, define_workflow, start_worker
from redflow.core import clock, codec
from redflow.engine.loops import REAPER_QUEUES_PER_PASS, Loop, Reaper
from redflow.testing import RedisServer


def count(r, prefix, name):
    return int(r.get(f"{prefix}:count:{name}") or 0)


# 12. promoter ---------------------------------------------------------------------


def test_promoter_moves_due_runs_to_ready_and_leaves_others(start, registry, client, r):
    @define_workflow("later", registry=registry)
    def later(ctx):
        return time.time()

    start()
    started_at = time.time()  # before the enqueue: the run is due 0.4 s after it at the earliest
    soon = later.run(None, client=client, delay=0.4)
    far = later.run(None, client=client, delay=60)
    finished_at = soon.result(5)
    assert finished_at - started_at >= 0.39
    assert client.get_run(soon.id).status == "succeeded"
    assert far.status() == "scheduled"
    assert r.zscore(client.keys.queue_scheduled("default"), far.id) is not None


def test_promoter_skips_stale_scheduled_entries(start, registry, client, r):
    @define_workflow("stale", registry=registry)
    def stale(ctx):
        return None

    k = client.keys
    r.hset(k.run("run_done", "default"), mapping={"workflow": "stale", "queue": "default", "status": "succeeded"})
    r.zadd(k.queue_scheduled("default"), {"run_done": 1})
    start()
    wait_until(lambda: r.zcard(k.queue_scheduled("default")) == 0)
    assert r.llen(k.queue_ready("default")) == 0 and r.hget(k.run("run_done", "default"), "status") == "succeeded"


# 13. reaper -----------------------------------------------------------------------


def test_reaper_returns_unleased_processing_runs_to_ready(start, registry, client, r, prefix):
    @define_workflow("orphan", registry=registry)
    def orphan(ctx):
        r.incr(f"{prefix}:count:orphan")
        return "recovered"

    handle = orphan.run(None, client=client)
    k = client.keys
    # a worker claimed it and died before taking the lease
    assert r.lmove(k.queue_ready("default"), k.queue_processing("default"), "RIGHT", "LEFT") == handle.id
    start(reaper_interval_ms=50)
    assert handle.result(5) == "recovered"
    assert count(r, prefix, "orphan") == 1
    assert r.llen(k.queue_processing("default")) == 0


def test_a_reaper_of_fifty_queues_returns_a_dead_workers_run_one_pass_after_its_queue_came_round(client, r):
    """Queues are scanned a few a pass, in turn; one whose processing list held entries is
    scanned again at every pass: the run is returned at the pass after its queue's turn (a
    second sighting, unleased), not a whole rotation of 17 passes later."""
    queues = [f"q{n:02}" for n in range(50)]
    k = client.keys
    r.lpush(k.queue_processing("q40"), "run_dead")  # claimed by a worker that died before its lease
    reaper = Reaper(client.store, queues, interval_ms=50)
    turn_of_q40 = 40 // REAPER_QUEUES_PER_PASS + 1
    passes = 0
    while r.llen(k.queue_processing("q40")) and passes < 2 * len(queues):
        reaper.step()
        passes += 1
    assert r.lrange(k.queue_ready("q40"), 0, -1) == ["run_dead"]
    assert passes == turn_of_q40 + 1, passes


def test_reaper_leaves_leased_runs_alone(start, registry, client, r):
    @define_workflow("held", registry=registry)
    def held(ctx):
        return None

    handle = held.run(None, client=client)
    k = client.keys
    r.lmove(k.queue_ready("default"), k.queue_processing("default"), "RIGHT", "LEFT")
    r.set(k.run_lease(handle.id, "default"), "lease_other", px=10_000)  # another live worker has it
    start(reaper_interval_ms=50)
    gevent.sleep(0.4)
    assert r.lrange(k.queue_processing("default"), 0, -1) == [handle.id]
    assert handle.status() == "queued"


# 14. cron -------------------------------------------------------------------------


def test_cron_fires_with_its_input_and_queue_once_per_tick_across_two_workers(start, registry, client, r, prefix):
    @define_workflow("tick", queue="cronq", cron=[{"expression": "* * * * * *", "input": {"from": "cron"}}], registry=registry)
    def tick(ctx):
        r.rpush(f"{prefix}:ticks", codec.dumps([ctx.input, ctx.run.queue]))

    workers = [start(concurrency=2), start(concurrency=2)]  # a second worker: only one may lead
    wait_until(lambda: r.llen(f"{prefix}:ticks") >= 3, timeout=15)
    assert r.get(client.keys.lock_cron()) in {worker.cron.token for worker in workers}
    for worker in workers:  # nothing fires or runs after this: what is read below holds still
        worker.stop(timeout=10)
    ticks = [codec.loads(x) for x in r.lrange(f"{prefix}:ticks", 0, -1)]
    assert all(t == [{"from": "cron"}, "cronq"] for t in ticks)
    runs = client.list_runs(workflow="tick")
    assert {run.status for run in runs} <= {"succeeded", "queued"}  # queued: fired as the workers stopped
    assert sum(run.status == "succeeded" for run in runs) == len(ticks)  # each run ran once
    # One run per fire time (the idempotency key the leader gives each fire), each time a tick's whole second.
    fire_keys = client.keys.idempotency("tick", "", "cronq")[: -len("0:")] + "*:cron:*"
    fires = {key.rsplit(":", 1)[1]: r.get(key) for key in r.scan_iter(fire_keys, count=1000)}
    assert sorted(fires.values()) == sorted(run.id for run in runs)
    assert all(int(fire_ms) % 1000 == 0 for fire_ms in fires)


def test_cron_next_time_is_computed_from_now_without_catch_up(start, registry, client, r):
    @define_workflow("hourly", cron=["0 * * * *"], registry=registry)
    def hourly(ctx):
        return None

    client.sync_registry(registry)
    k = client.keys
    (cron_id,) = r.zrange(k.cron_next(), 0, -1)
    r.zadd(k.cron_next(), {cron_id: clock.now_ms() - 5 * 3_600_000})  # five hours of missed fires
    start()
    wait_until(lambda: r.zscore(k.cron_next(), cron_id) > clock.now_ms())
    gevent.sleep(0.3)
    assert len(client.list_runs(workflow="hourly")) == 1  # one fire, not five
    assert r.zscore(k.cron_next(), cron_id) % 3_600_000 == 0


def test_a_corrupted_cron_definition_is_dropped_with_a_log_line(start, registry, client, r, caplog):
    @define_workflow("fine", registry=registry)
    def fine(ctx):
        return None

    k = client.keys
    r.hset(k.cron_def(), "cron_broken", "{not json")
    r.zadd(k.cron_next(), {"cron_broken": 1})
    r.hset(k.cron_def(), "cron_badexpr", codec.dumps({"id": "cron_badexpr", "workflow": "fine", "queue": "default",
                                                      "expression": "nope", "timezone": None, "inputJson": "{}"}))  # fmt: skip
    r.zadd(k.cron_next(), {"cron_badexpr": 1})
    with caplog.at_level(logging.ERROR, logger="redflow.loops"):
        start()
        wait_until(lambda: r.zcard(k.cron_next()) == 0)
    assert "cron_broken dropped" in caplog.text and "cron_badexpr dropped" in caplog.text
    assert client.list_runs(workflow="fine") == []


def test_cron_leadership_moves_when_the_leader_stops(start, registry, client, r):
    @define_workflow("noop", registry=registry)
    def noop(ctx):
        return None

    first = start()
    wait_until(lambda: first.cron.is_leader)
    second = start()
    gevent.sleep(0.3)
    assert not second.cron.is_leader
    first.stop(timeout=1)
    wait_until(lambda: second.cron.is_leader, timeout=3)


# 15. Redis errors ------------------------------------------------------------------


def test_loops_back_off_while_redis_is_down_and_recover(registry, prefix, redis_servers, caplog):
    server = RedisServer().start()
    redis_servers.append(server)

    @define_workflow("survivor", registry=registry)
    def survivor(ctx):
        return "alive"

    client = create_client(server.url, prefix=prefix, registry=registry)
    worker = start_worker(registry, url=server.url, prefix=prefix, concurrency=20, blmove_timeout=0.2, reaper_interval_ms=50)
    try:
        server.stop()
        with caplog.at_level(logging.WARNING, logger="redflow"):
            before = resource.getrusage(resource.RUSAGE_SELF)
            gevent.sleep(2.0)
            after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert cpu < 0.6, f"worker burned {cpu:.2f}s of CPU in 2s while Redis was down"
        assert "Redis error" in caplog.text
        server.start()
        handle = survivor.run(None, client=client)
        assert handle.result(10) == "alive"
    finally:
        worker.stop(timeout=2)
        client.close()


def test_a_loop_survives_unexpected_errors(caplog):
    from gevent.event import Event

    calls = []

    def step():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("bug")
        return 0.01

    stop = Event()
    with caplog.at_level(logging.ERROR, logger="redflow.loops"):
        loop = Loop("test", step, stop).start()
        wait_until(lambda: len(calls) >= 4, timeout=3)
        stop.set()
        loop.wake()
        loop.greenlet.join(1)
    assert "test failed" in caplog.text and loop.greenlet.dead


@pytest.mark.parametrize("queues", [["a", "b", "c"]])
def test_slots_start_blocking_on_different_queues(start, registry, client, queues):
    for q in queues:
        define_workflow(f"wf-{q}", queue=q, registry=registry)(lambda ctx: ctx.run.queue)
    worker = start(concurrency=3, blmove_timeout=2.0)
    gevent.sleep(0.1)  # each slot now blocks on its own queue
    began = time.monotonic()
    handles = [client.run(f"wf-{q}", None) for q in queues]
    assert [h.result(5) for h in handles] == queues
    assert time.monotonic() - began < 1.0
    # A result is readable as soon as the settle script ran; the worker counts it when the reply comes back.
    wait_until(lambda: worker.stats["succeeded"] == 3, timeout=2)


def test_a_worker_syncs_its_registry_again_when_redis_lost_it(start, registry, client, r, monkeypatch):
    import redflow.engine.worker

    monkeypatch.setattr(redflow.engine.worker, "REGISTRY_CHECK_S", 0.05)

    @define_workflow("remembered", cron=["0 * * * *"], registry=registry)
    def remembered(ctx):
        return None

    start()
    k = client.keys
    r.delete(k.workflow("remembered"), k.workflows(), k.cron_def(), k.cron_next())  # as after a restart without persistence
    wait_until(lambda: r.exists(k.workflow("remembered")) and r.hlen(k.cron_def()) == 1 and r.zcard(k.cron_next()) == 1)
