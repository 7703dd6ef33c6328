"""Priorities: within a queue, a waiting run of higher priority is claimed
before any waiting run of lower priority, equal priorities in enqueue order;
runs of priority 0 (and those other clients enqueue) use the ready list as
before. The fleet test (2,000 queued runs, a -c 1 worker subprocess) is in
tests/test_flow_control_fleet.py.
"""

from __future__ import annotations

import pytest
from helpers import wait_until
from invariants import unrecoverable

from redflow import Registry, define_workflow
from redflow.core.errors import RedflowError
from redflow.core.flow import PRIORITY_MARKER
from redflow.core.keys import new_id
from redflow.engine.limits import FlowSweeper
from redflow.store.catalog import script_source

LEASE_MS = 60_000


@pytest.fixture
def echo(registry: Registry):
    @define_workflow("echo", registry=registry)
    def echo(ctx):
        return ctx.input

    return echo


def _take_all(client) -> list[str]:
    """Claim and start every run of the default queue, in claim order (as workers would)."""
    taken = []
    while (claim := client.scripts.take_run(queue="default", token=new_id("lease"), lease_ms=LEASE_MS, now_ms=client.now_ms())) is not None:
        taken.append(claim.run_id)
    return taken


def test_higher_priorities_are_claimed_first_and_equal_ones_in_enqueue_order(client, echo, r):
    ids = {}
    for name, priority in [("a", 0), ("b", 0), ("c", 5), ("d", 9), ("e", 5), ("f", 0), ("g", 1)]:
        ids[client.run(echo, name, priority=priority).id] = name
    assert [ids[run_id] for run_id in _take_all(client)] == ["d", "c", "e", "g", "a", "b", "f"]
    assert r.llen(client.keys.queue_ready("default")) == 0 and r.zcard(client.keys.queue_prioritized("default")) == 0


def test_the_marker_is_one_entry_however_many_runs_it_stands_for(client, echo, r):
    for i in range(5):
        client.run(echo, i, priority=3)
    assert r.lrange(client.keys.queue_ready("default"), 0, -1) == [PRIORITY_MARKER]
    assert r.hget(client.keys.run(_take_all(client)[0]), "priority") == "3"


@pytest.mark.parametrize("priority", [10, -1, "5", True, 2.5])
def test_a_priority_outside_0_to_9_is_refused_and_nothing_is_enqueued(client, echo, r, priority):
    with pytest.raises(RedflowError, match="priority must be an int from 0 to 9"):
        client.run(echo, 1, priority=priority)
    assert r.zcard(client.keys.runs_created()) == 0


def test_canceling_a_prioritized_run_removes_it_and_its_leftover_marker_is_skipped(client, echo, r):
    plain = client.run(echo, "plain")
    urgent = client.run(echo, "urgent", priority=9)
    assert client.cancel(urgent.id) is True
    assert r.zcard(client.keys.queue_prioritized("default")) == 0
    assert _take_all(client) == [plain.id]
    assert r.llen(client.keys.queue_ready("default")) == 0 and r.llen(client.keys.queue_processing("default")) == 1


def test_delayed_and_retried_runs_keep_their_priority(start, client, registry, r):
    @define_workflow("fails", registry=registry, max_attempts=1)
    def fails(ctx):
        raise RuntimeError("fails")

    later = client.run(fails, "later", priority=7, delay=0.05)
    plain = client.run(fails, "plain")
    wait_until(lambda: client.scripts.promote_run(run_id=later.id, queue="default", now_ms=client.now_ms()) == "promoted")
    assert r.zscore(client.keys.queue_prioritized("default"), later.id) is not None
    worker = start(concurrency=1)
    wait_until(lambda: later.status() == "failed" and plain.status() == "failed")
    worker.stop()
    assert client.retry(plain.id) is True and client.retry(later.id) is True
    assert _take_all(client) == [later.id, plain.id]


def test_a_worker_blocked_on_an_empty_queue_takes_a_prioritized_run_through_its_marker(start, client, echo):
    worker = start(concurrency=1)
    wait_until(lambda: worker.in_flight == 0)
    assert client.run(echo, "urgent", priority=9).result(10) == "urgent"
    assert [client.run(echo, i, priority=i % 10).result(10) for i in range(12)] == list(range(12))


def test_a_marker_dropped_by_a_worker_that_knows_no_priorities_is_put_back(start, client, echo, r):
    handles = [client.run(echo, i, priority=4) for i in range(3)]
    r.lrem(client.keys.queue_ready("default"), 0, PRIORITY_MARKER)  # as a foreign worker drops an entry with no run
    assert unrecoverable(r, client.keys, [h.id for h in handles]) == {}  # waiting in the zset...
    sweeper = FlowSweeper(client.store, ["default"], interval_s=0.01)
    sweeper.step()
    assert r.lrange(client.keys.queue_ready("default"), 0, -1) == [PRIORITY_MARKER]
    sweeper.step()  # ... and only one marker, however often it looks
    assert r.llen(client.keys.queue_ready("default")) == 1
    start(concurrency=1)
    assert [h.result(10) for h in handles] == [0, 1, 2]


def test_the_lua_marker_is_the_python_one():
    assert f'local PRIORITY_MARKER = "{PRIORITY_MARKER}"' in script_source("take_run")
