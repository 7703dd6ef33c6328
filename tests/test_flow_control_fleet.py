"""Flow control across worker processes: concurrency limits (global and per
key), a sliding-window rate limit, priorities, and a worker killed while it
holds units.

The workers are ``redflow-gevent worker`` subprocesses running
tests/apps/flow_app.py; the handlers write their starts and ends to side keys
of the same Redis that the engine never reads, and the assertions are made
from those (how many ran at once, how many started in any window, in which
order), not from the engine's bookkeeping. No assertion is about speed:
waits are bounded, and what they wait for is a count.
"""

from __future__ import annotations

import signal
import time

import pytest
from helpers import WorkerProcess, wait_until

from redflow import create_client
from tests.apps.flow_app import registry as app_registry

APP = "tests.apps.flow_app:registry"


@pytest.fixture
def app_client(redis_url, prefix):
    """A client that knows the app's workflows (it computes their limits at enqueue)."""
    c = create_client(redis_url, prefix=prefix, registry=app_registry)
    yield c
    c.close()


@pytest.fixture
def workers(redis_url, prefix):
    spawned: list[WorkerProcess] = []

    def spawn(concurrency: int, lease_ms: int = 1000) -> WorkerProcess:
        worker = WorkerProcess(redis_url, prefix, concurrency=concurrency, app=APP, lease_ms=lease_ms)
        spawned.append(worker)
        return worker

    yield spawn
    for worker in spawned:
        worker.stop()
        worker.log.close()


def intervals(r, side: str, *, open_until: float | None = None) -> list[tuple[str, float, float]]:
    """``(label, start, end)`` of every handler execution; one with no end (its
    worker was killed) ends at ``open_until``."""
    starts, ends = r.hgetall(side + ":start"), r.hgetall(side + ":end")
    out = []
    for field, start in starts.items():
        end = ends.get(field)
        assert end is not None or open_until is not None, f"{field} never ended"
        out.append((field.split("|")[0], float(start), float(end) if end is not None else float(open_until or 0)))
    return out


def most_at_once(spans: list[tuple[str, float, float]]) -> int:
    """The most executions running at one instant (an end before a start at the same instant)."""
    events = sorted([(start, 1) for _, start, _ in spans] + [(end, -1) for _, _, end in spans])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def wait_succeeded(client, handles, timeout: float) -> None:
    wait_until(lambda: client.count_runs("succeeded") >= len(handles), timeout=timeout, interval=0.2,
               message=f"{len(handles)} runs to succeed")  # fmt: skip
    assert {h.status() for h in handles} == {"succeeded"}


def test_two_workers_of_50_slots_never_run_more_than_5_of_a_workflow_limited_to_5(workers, redis_url, prefix, r):
    side = f"side:{prefix}"
    workers(50), workers(50)
    # A client without the workflow's definition: the workers compute the limits when they first claim each run.
    with create_client(redis_url, prefix=prefix) as client:
        wait_until(lambda: r.exists(client.keys.workflow("limited")), timeout=30, message="the workers to sync")
        handles = client.run_many("limited", [{"side": side, "sleep": 0.02} for _ in range(300)])
        wait_succeeded(client, handles, timeout=120)
    spans = intervals(r, side)
    assert len(spans) == 300  # each run's handler ran once
    assert most_at_once(spans) <= 5
    assert most_at_once(spans) >= 2  # the limit, not a single slot, is what held them back


def test_per_customer_limits_hold_each_customer_to_2_and_customers_do_not_wait_for_each_other(workers, app_client, prefix, r):
    side = f"side:{prefix}"
    workers(20)
    inputs = [{"side": side, "label": customer, "sleep": 0.05} for _ in range(50) for customer in "ABCD"]
    handles = app_client.run_many("per-customer", inputs)
    lone = app_client.run("per-customer", {"side": side, "label": "E", "sleep": 0.05})
    wait_succeeded(app_client, [*handles, lone], timeout=120)
    spans = intervals(r, side)
    assert len(spans) == 201
    for customer in "ABCDE":
        assert most_at_once([s for s in spans if s[0] == customer]) <= 2, customer
    assert most_at_once(spans) > 2  # customers ran side by side
    # E's one run, enqueued last, did not wait for the 50 runs of A (nor of B, C, D)
    (e_start,) = [start for label, start, _ in spans if label == "E"]
    a_starts = sorted(start for label, start, _ in spans if label == "A")
    assert e_start < a_starts[10], (e_start, a_starts[:12])


@pytest.mark.slow
def test_a_rate_limit_of_20_per_second_never_lets_21_start_in_a_second(workers, app_client, prefix, r):
    side = f"side:{prefix}"
    workers(20)
    handles = app_client.run_many("rated", [{"side": side} for _ in range(100)])
    wait_succeeded(app_client, handles, timeout=60)
    starts = sorted(float(t) for t in r.lrange(side + ":starts", 0, -1))
    assert len(starts) == 100
    # Starts are taken in the handler, a few ms after the script admitted them:
    # windows 0.1 s short of the period leave room for that jitter.
    window = 1.0 - 0.1
    busiest = max(sum(1 for t in starts[i:] if t < first + window) for i, first in enumerate(starts))
    assert busiest <= 20, busiest
    span = starts[-1] - starts[0]
    print(f"100 runs at 20/s: first to last start {span:.2f}s")
    assert span >= 4 * window  # 100 starts, at most 20 in any window: at least four windows


def test_priority_9_runs_start_within_the_next_few_claims_of_2000_queued(workers, app_client, prefix, r):
    side = f"side:{prefix}"
    order = side + ":order"
    app_client.run_many("prioritized", [{"side": side, "label": "p0", "sleep": 0.001} for _ in range(2000)])
    worker = workers(1)
    wait_until(lambda: r.llen(order) >= 50, timeout=30, message="the worker to be draining")
    started_before = r.llen(order)
    app_client.run_many("prioritized", [{"side": side, "label": f"p9-{i}"} for i in range(10)], priority=9)
    wait_until(lambda: sum(1 for label in r.lrange(order, 0, -1) if label.startswith("p9")) == 10, timeout=30)
    labels = r.lrange(order, 0, -1)
    positions = [i for i, label in enumerate(labels) if label.startswith("p9")]
    print(f"p9 runs enqueued after {started_before} starts; started at positions {positions}")
    assert positions[-1] < started_before + 10 + 5  # all ten within the next few claims
    assert [labels[i] for i in positions] == [f"p9-{i}" for i in range(10)]  # equal priorities stay FIFO
    assert r.llen(app_client.keys.queue_ready("default")) > 1000  # ... while most p0 runs still wait
    worker.stop()


@pytest.mark.slow
def test_a_worker_killed_holding_units_leaks_none_and_the_limit_admits_runs_again(workers, app_client, prefix, r):
    side = f"side:{prefix}"
    victim = workers(10, lease_ms=1000)
    handles = app_client.run_many("slow-limited", [{"side": side, "sleep": 1.5} for _ in range(9)])
    wait_until(lambda: r.hlen(side + ":start") >= 3, timeout=30, message="the victim to hold the 3 units")
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    killed_at = time.time()
    assert r.get(app_client.keys.workflow_running("slow-limited")) == "3"  # the dead worker's runs still hold them
    workers(10)
    wait_succeeded(app_client, handles, timeout=90)
    spans = intervals(r, side, open_until=killed_at)
    assert most_at_once(spans) <= 3
    assert len(spans) == 9 + 3  # the 3 killed executions ran again, every other run once
    assert r.get(app_client.keys.workflow_running("slow-limited")) == "0"
    assert r.scard(app_client.keys.limit_waiting("slow-limited")) == 0
