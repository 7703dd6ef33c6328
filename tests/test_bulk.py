"""retry_many / cancel_many against a real redis-server: bounded batches, each
run acted on at most once per call, finished runs left alone."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import LONG_TESTS, wait_until

from redflow import NonRetryableError, define_workflow
from redflow.core.errors import RedflowError
from redflow.store import bulk

#: Failed runs the bulk retry acts on: (id, count); the long form with REDFLOW_LONG_TESTS=1 (tests/helpers.py).
#: 4,000 are still 20 batches of 200 racing the worker.
BULK = ("long", 10_000) if LONG_TESTS else ("bounded", 4_000)


@pytest.mark.heavy
@pytest.mark.parametrize("total", [BULK[1]], ids=[BULK[0]])
def test_bulk_retry_of_thousands_of_failed_runs_retries_each_once_while_a_worker_runs_them(client, registry, start, monkeypatch, total):
    """4,000 failed runs (10,000 with REDFLOW_LONG_TESTS=1) retried in batches of 200 while a worker runs them."""
    executions: Counter[str] = Counter()

    @define_workflow("import-row", registry=registry, max_attempts=1)
    def import_row(ctx):
        executions[ctx.run.id] += 1
        if ctx.input["stubborn"] or ctx.run.attempt == 1:
            raise NonRetryableError("the upstream API was down")
        return ctx.run.attempt

    client.run_many(import_row, [{"stubborn": n % 2 == 0} for n in range(total)])
    start(concurrency=50)
    wait_until(lambda: client.count_runs("failed") == total, timeout=120, interval=0.2)
    monkeypatch.setattr(bulk, "BULK_BATCH", 200)  # many batches, while the worker fails half of them again
    assert client.retry_many(workflow="import-row") == total
    wait_until(lambda: client.count_runs("failed") + client.count_runs("succeeded") == total and client.count_runs("running") == 0,
               timeout=120, interval=0.2)  # fmt: skip
    assert len(executions) == total and set(executions.values()) == {2}
    assert client.count_runs("succeeded") == total // 2 == client.count_runs("failed")
    assert client.count_matching("import-row", "failed") == total // 2  # the index follows
    assert client.retry_many(workflow="import-row", status="canceled") == 0


def test_bulk_cancel_leaves_finished_runs_untouched(client, registry, start, r):
    @define_workflow("quick", registry=registry, queue="served")
    def quick(ctx):
        return ctx.input

    @define_workflow("later", registry=registry, queue="unserved")
    def later(ctx):
        return None

    worker = start(queues=["served"])
    done = [client.run("quick", {"n": n}, tags={"customer": "42"}) for n in range(20)]
    wait_until(lambda: all(h.status() == "succeeded" for h in done), timeout=20)
    worker.stop()
    before = {h.id: r.hgetall(client.keys.run(h.id, "served")) for h in done}
    queued = [client.run("later", {}, tags={"customer": "42"}) for _ in range(30)]
    scheduled = [client.run("later", {}, tags={"customer": "42"}, delay=3600) for _ in range(10)]
    other = client.run("later", {}, tags={"customer": "7"})

    assert client.cancel_many(status=None, tags={"customer": "42"}, reason="incident 18") == 40
    assert {h.id: r.hgetall(client.keys.run(h.id, "served")) for h in done} == before
    assert all(client.get_run(h.id).status == "canceled" for h in queued + scheduled)
    assert client.get_run(queued[0].id).cancel_reason == "incident 18"
    assert other.status() == "queued"
    assert r.zcard(client.keys.queue_scheduled("unserved")) == 0  # (ready entries of canceled runs are dropped when claimed)
    assert client.count_matching(status="canceled", tags={"customer": "42"}) == 40
    assert client.cancel_many(status=None, tags={"customer": "42"}) == 0


def test_bulk_actions_refuse_statuses_they_cannot_act_on(client):
    with pytest.raises(RedflowError, match="retry_many takes runs that are failed or canceled"):
        client.retry_many(status="succeeded")
    with pytest.raises(RedflowError, match="cancel_many takes runs that are scheduled or queued or running"):
        client.cancel_many(status="failed")
    with pytest.raises(RedflowError, match="unknown run status"):
        client.cancel_many(status="bogus")
