"""The worker registry: heartbeat records, `redflow-gevent workers`, lost and departed workers."""

import logging
import os
import signal
import subprocess
import time
from types import SimpleNamespace

import gevent
import pytest
from helpers import CLI, ROOT, WorkerProcess, wait_until
from redis.exceptions import RedisError

from redflow import CorruptDataError, RedflowError, WorkerOptions, create_client, define_workflow
from redflow.core import codec, tally
from redflow.core.models import WorkerRecord
from redflow.engine.heartbeat import Heartbeat, WorkerStatus
from redflow.ops.views.workers import list_workers, totals
from redflow.testing import RedisServer


def workers_cli(redis_url, prefix, *extra):
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix)
    return subprocess.run([CLI, "workers", *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def listed(redis_url, prefix):
    """{pid: worker} from `workers --json`."""
    done = workers_cli(redis_url, prefix, "--json")
    assert done.returncode == 0, done.stderr
    return {w["pid"]: w for w in codec.loads(done.stdout)}


def test_an_in_process_worker_publishes_its_record_and_removes_it_on_a_graceful_stop(start, registry, client):
    @define_workflow("hold", registry=registry, queue="slow")
    def hold(ctx):
        gevent.sleep(ctx.input)

    worker = start(concurrency=3, heartbeat_s=0.1, queues=["slow", "other"])
    held = client.run("hold", 30)
    wait_until(lambda: [v for v in list_workers(client) if v.record.busy == 1], timeout=10, message="a beat with the run in flight")
    (view,) = list_workers(client)
    record = view.record
    assert view.state == "alive" and record.id == worker.id and record.pid == os.getpid()
    assert record.queues == ("slow", "other") and record.slots == 3 and record.running == ((held.id, "hold"),)
    assert totals(list_workers(client)) == {"alive": 1, "stopping": 0, "lost": 0, "slots": 3, "busy": 1}

    client.cancel(held.id)
    wait_until(lambda: list_workers(client)[0].record.done == 1, timeout=10, message="the canceled run counted as done")
    worker.stop(timeout=5)
    assert list_workers(client) == []
    assert client.redis.exists(client.keys.worker(worker.id), client.keys.workers()) == 0


def test_a_stopping_worker_says_so_while_its_runs_drain(start, registry, client):
    @define_workflow("drain", registry=registry)
    def drain(ctx):
        gevent.sleep(ctx.input)

    worker = start(heartbeat_s=0.1)
    handle = client.run("drain", 1.5)
    wait_until(lambda: handle.status() == "running", timeout=10)
    stopper = gevent.spawn(worker.stop, 10)
    wait_until(lambda: [v for v in list_workers(client) if v.state == "stopping"], timeout=5, message="the stopping state")
    stopper.join(15)
    assert handle.status() == "succeeded" and list_workers(client) == []


def test_records_that_do_not_parse_are_skipped_and_bad_options_refused(start, client, r):
    worker = start(heartbeat_s=0.1)
    wait_until(lambda: list_workers(client), timeout=10)
    bad = {"worker_not_json": "{not json", "worker_no_id": "[1, 2]", "worker_bad_pid": '{"id": "worker_bad_pid", "pid": "x"}'}
    for worker_id, raw in bad.items():
        r.set(client.keys.worker(worker_id), raw)
    r.zadd(client.keys.workers(), {**dict.fromkeys(bad, client.now_ms()), "worker_expired": client.now_ms()})
    assert [v.record.id for v in list_workers(client)] == [worker.id]
    for raw in bad.values():
        with pytest.raises(CorruptDataError, match="worker record"):
            WorkerRecord.from_json(raw)
    with pytest.raises(RedflowError, match="heartbeat_s"):
        WorkerOptions(heartbeat_s=0)


def test_a_lost_record_is_told_from_a_live_one_by_its_last_beat():
    record = WorkerRecord(
        id="worker_x", host="h", pid=1, version="0", queues=("default",), slots=4, busy=2, done=0, failed=0,
        started_at=1000.0, seen_at=2000.0, beat_s=2.0, stopping=False, running=(),
    )  # fmt: skip
    assert record.state(2006.9) == "alive" and record.state(2007.1) == "lost"
    assert WorkerRecord.from_json(record.to_json()) == record


@pytest.mark.slow
def test_the_workers_command_lists_two_worker_processes_drops_a_stopped_one_and_marks_a_killed_one_lost(redis_url, prefix, cli_client):
    # The waits read the records in this process (list_workers, what the command prints); each
    # state waited for is then read through the command once (a CLI process costs ~0.5 s of CPU).
    with WorkerProcess(redis_url, prefix, concurrency=3) as first, WorkerProcess(redis_url, prefix, concurrency=3) as second:
        pids = {first.proc.pid, second.proc.pid}
        wait_until(lambda: {v.record.pid for v in list_workers(cli_client)} == pids, timeout=30, message="both workers listed")
        assert set(listed(redis_url, prefix)) == pids
        handles = [cli_client.run("sleep", {"s": 60, "key": f"{prefix}:slept"}) for _ in range(4)]
        wait_until(lambda: all(h.status() == "running" for h in handles), timeout=20)
        in_records = lambda: {run_id for v in list_workers(cli_client) for run_id, _ in v.record.running}  # noqa: E731
        wait_until(lambda: in_records() == {h.id for h in handles}, timeout=20, message="the four runs in the records")
        workers = listed(redis_url, prefix)
        assert {run["run_id"] for w in workers.values() for run in w["running"]} == {h.id for h in handles}
        assert sum(w["busy"] for w in workers.values()) == 4
        assert all(w["busy"] == len(w["running"]) and w["slots"] == 3 and w["state"] == "alive" for w in workers.values())
        table = workers_cli(redis_url, prefix).stdout
        assert "STATE" in table and all(str(pid) in table for pid in pids)

        for handle in handles:
            cli_client.cancel(handle.id)
        wait_until(lambda: all(h.status() == "canceled" for h in handles), timeout=20)
        first.signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0
        assert set(listed(redis_url, prefix)) == {second.proc.pid}  # its goodbye removed it at once

        second.kill()
        wait_until(lambda: [v.state for v in list_workers(cli_client)] == ["lost"], timeout=30, interval=0.2)
        assert listed(redis_url, prefix)[second.proc.pid]["state"] == "lost"  # still listed: lost until its record expires


def test_the_workers_command_says_when_there_are_none_and_when_redis_is_down(redis_url, prefix):
    done = workers_cli(redis_url, prefix)
    assert done.returncode == 0 and done.stdout.strip() == "(no workers)"
    down = subprocess.run([CLI, "workers", "--redis-url", "redis://:secret@127.0.0.1:1/0"], capture_output=True, text=True, timeout=60)
    assert down.returncode == 2 and "error: Redis at" in down.stderr and "secret" not in down.stderr


def test_tallies_counted_while_redis_is_down_are_flushed_when_it_is_back(prefix, redis_servers, caplog):
    server = RedisServer().start()
    redis_servers.append(server)
    client = create_client(server.url, prefix=prefix)
    try:
        beat = Heartbeat(client.store, "worker_t", ["default"], 2, lambda: WorkerStatus(0, 0, 0, False, ()), known={"w"}.__contains__)
        ended = SimpleNamespace(kind="succeeded")
        attempt = SimpleNamespace(
            started_at=time.time() - 0.05, created_at_ms=client.now_ms() - 100, info=SimpleNamespace(workflow="w", attempt=1)
        )
        beat.count(attempt, ended)
        server.stop()
        with pytest.raises(RedisError):
            beat.step()
        beat.count(attempt, ended)
        server.start()
        beat.step()
        resolution = tally.RESOLUTIONS["1h"]
        buckets = [
            tally.parse_bucket(client.redis.hgetall(client.keys.stats_bucket(60, s))) for s in resolution.starts(client.now_ms())[-2:]
        ]
        assert sum(sum(b.merged(tally.DURATION)) for b in buckets) == 2 == sum(sum(b.merged(tally.START)) for b in buckets)
        assert [v.record.id for v in list_workers(client)] == ["worker_t"]
        server.stop()
        with caplog.at_level(logging.INFO, logger="redflow.heartbeat"):
            beat.goodbye()  # Redis cannot take it: logged, the record expires by itself
        assert "could not remove this worker's record" in caplog.text
    finally:
        client.close()
