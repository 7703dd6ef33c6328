"""`redflow-gevent worker` as a real subprocess, and the data-model interop of its runs."""

import signal
import time

from helpers import WorkerProcess, wait_until

from redflow import create_client
from redflow.core import clock, codec
from redflow.registry import Registry


def test_worker_command_runs_workflows_and_stops_gracefully_on_sigterm(redis_url, prefix, cli_client):
    with WorkerProcess(redis_url, prefix) as worker:
        handles = [cli_client.run("count", {"key": f"{prefix}:seen", "n": i}) for i in range(20)]
        assert [h.result(20) for h in handles] == [i + 1 for i in range(20)]
        slow = cli_client.run("sleep", {"s": 1.0, "key": f"{prefix}:slept"})
        wait_until(lambda: slow.status() == "running", timeout=10)
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0
        assert slow.status() == "succeeded"  # the run in flight finished before exit
        output = worker.output()
    assert "worker started" in output and "stopping gracefully" in output


def test_a_second_signal_exits_at_once_and_another_worker_recovers(redis_url, prefix, cli_client, r):
    with WorkerProcess(redis_url, prefix) as worker:
        slow = cli_client.run("sleep", {"s": 30, "key": f"{prefix}:slept"})
        wait_until(lambda: slow.status() == "running", timeout=10)
        worker.signal(signal.SIGTERM)
        time.sleep(0.3)
        began = time.monotonic()
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=5) != 0
        assert time.monotonic() - began < 3
    assert slow.status() == "running"  # not finalized by the worker that left
    r.hset(cli_client.keys.run(slow.id), "inputJson", codec.dumps({"s": 0, "key": f"{prefix}:slept"}))
    with WorkerProcess(redis_url, prefix):
        assert slow.result(20) == "slept"  # lease expired, the reaper handed it over


def test_a_run_written_by_another_client_is_run_and_read_back_in_the_same_format(redis_url, prefix, r):
    """Write the hash and queue entry by hand, as the TypeScript client does."""
    k = create_client(redis_url, prefix=prefix, registry=Registry()).keys
    run_id = "run_8c1e7c3a-1f2b-4d3c-9a4b-5e6f7a8b9c0d"
    created = clock.now_ms()
    r.hset(k.run(run_id), mapping={
        "workflow": "count", "queue": "default", "status": "queued", "inputJson": '{"key":"' + prefix + ':ts","n":41}',
        "attempt": "0", "maxAttempts": "3", "createdAt": str(created), "cancelRequestedAt": "", "cancelReason": "",
    })  # fmt: skip
    r.zadd(k.runs_created(), {run_id: created})
    r.zadd(k.runs_status("queued"), {run_id: created})
    r.zadd(k.workflow_runs("count"), {run_id: created})
    r.lpush(k.queue_ready("default"), run_id)
    with WorkerProcess(redis_url, prefix):
        wait_until(lambda: r.hget(k.run(run_id), "status") == "succeeded", timeout=15)
    fields = r.hgetall(k.run(run_id))
    assert fields["outputJson"] == "42" and fields["attempt"] == "1"
    assert int(fields["startedAt"]) >= created and int(fields["finishedAt"]) >= int(fields["startedAt"])
    assert "errorJson" not in fields and "availableAt" not in fields
    assert r.zscore(k.runs_status("succeeded"), run_id) == int(fields["finishedAt"])
    assert r.zscore(k.runs_status("queued"), run_id) is None and r.zscore(k.runs_status("running"), run_id) is None
    steps = {name: codec.loads(raw) for name, raw in r.hgetall(k.run_steps(run_id)).items()}
    assert steps["first"]["status"] == "succeeded" and steps["first"]["outputJson"] == "41" and steps["first"]["seq"] == 1
    fields = {"status", "seq", "startedAt", "finishedAt", "outputJson", "attempt"}  # + "attempt", an extension others ignore
    assert steps["second"]["seq"] == 2 and set(steps["second"]) == fields
    assert r.llen(k.queue_processing("default")) == 0 and r.pttl(k.run_lease(run_id)) <= 5000  # left to expire
