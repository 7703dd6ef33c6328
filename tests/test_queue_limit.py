"""The limit on one queue's runs in flight (engine/queue_limit.py, issue 34's fair queues).

Invariants:
- the limit moves only by the hub's lag: down by a tenth of the busiest queue's runs in
  flight while the lag is high (never below MIN_LIMIT, never cut below what is in flight
  when that is under MIN_LIMIT), up by a tenth while it is low (never above the slots);
- a queue at its limit gets no idle slot and its settles claim nothing next, while the
  idle slots it leaves may be reserved by the other queues' claimers;
- runs that wait on I/O leave the hub idle: a worker of several queues still keeps every
  slot busy on one queue of them (the limit costs an I/O-bound worker nothing);
- runs that keep the CPU busy bring the limit down, and every run still ends once.
"""

from __future__ import annotations

import time

import gevent
import pytest
from helpers import wait_until

from redflow.engine.board import Board, Work
from redflow.engine.queue_limit import LAG_HIGH_MS, LAG_LOW_MS, MIN_LIMIT, SAMPLE_S, SLACK_SAMPLE_S, QueueLimit
from redflow.registry import Registry, define_workflow


def test_a_high_lag_cuts_the_limit_to_the_floor_and_a_low_lag_raises_it_to_the_slots():
    in_flight = [500]
    raised: list[int] = []
    limit = QueueLimit(500, lambda: in_flight[0])
    limit.on_raise = lambda: raised.append(limit.limit)
    limit.heard(lag_ms=LAG_HIGH_MS + 1)
    assert limit.limit == 450  # a tenth of the 500 in flight
    for _ in range(100):
        limit.heard(lag_ms=LAG_HIGH_MS + 1)
    assert limit.limit == MIN_LIMIT
    limit.heard(lag_ms=(LAG_HIGH_MS + LAG_LOW_MS) / 2)  # between the two: no move
    assert limit.limit == MIN_LIMIT and raised == []
    for _ in range(100):
        limit.heard(lag_ms=LAG_LOW_MS / 2)
    assert limit.limit == 500 and raised[0] > MIN_LIMIT and raised[-1] == 500


def test_the_cut_starts_from_what_is_in_flight_and_spares_a_queue_below_the_floor():
    in_flight = [200]
    limit = QueueLimit(500, lambda: in_flight[0])
    limit.heard(lag_ms=LAG_HIGH_MS * 3)
    assert limit.limit == 180  # from the 200 in flight, not from the 500 slots
    in_flight[0] = MIN_LIMIT - 1  # the lag comes from elsewhere (another process, one long step)
    limit.heard(lag_ms=LAG_HIGH_MS * 3)
    assert limit.limit == 180


def test_the_sampler_hears_how_late_its_own_timer_fired_and_samples_seldom_while_the_limit_cannot_bind():
    heard: list[float] = []
    in_flight = [MIN_LIMIT]
    limit = QueueLimit(500, lambda: in_flight[0])
    limit.heard = lambda lag_ms: heard.append(lag_ms)  # type: ignore[method-assign]
    delay = limit.step()
    assert delay == SAMPLE_S
    time.sleep(delay + 0.02)  # the timer's turn came 20 ms late
    limit.step()
    assert len(heard) == 1 and heard[0] >= 20.0
    in_flight[0] = MIN_LIMIT - 1  # no queue near the floor, the limit at the slots: an idle worker
    assert limit.step() == SLACK_SAMPLE_S


def test_a_queue_at_its_limit_gets_no_idle_slot_and_lets_the_claimers_reserve_them():
    board = Board(["busy", "quiet"], slots=10)
    assert board.limit is not None
    board.limit.limit = 2
    board.begun("busy")
    board.begun("busy")
    assert board.at_limit("busy") and not board.over_limit("busy")
    idle = [gevent.spawn(board.wait_work) for _ in range(3)]
    gevent.sleep(0)
    assert not board.busy and board.try_reserve()  # the quiet queue's claimer may reserve one
    board.mark("busy")
    gevent.sleep(0)
    assert not any(g.ready() for g in idle)  # no take of the busy queue, and no poll (a claimer holds a slot)
    assert board.hand(Work("quiet", "run_quiet"))
    gevent.sleep(0)
    assert [g.value.run_id for g in idle if g.ready()] == ["run_quiet"]
    board.ended("busy")  # below its limit again: an idle slot takes from it
    gevent.sleep(0)
    works = [(g.value.queue, g.value.run_id, g.value.poll) for g in idle if g.ready()]
    # a take of the busy queue, and the busy worker's poll of the other queue (none reserved now)
    assert works == [("quiet", "run_quiet", ()), ("busy", None, ()), ("", None, ("quiet",))]
    board.begun("busy")
    board.begun("busy")
    assert board.over_limit("busy")  # a settle of its runs claims nothing next now
    board.close()


def test_a_worker_of_one_queue_keeps_no_limit():
    assert Board(["only"], slots=500).limit is None
    assert Board(["a", "b"], slots=4).limit is None  # too few slots to keep one polling either


def test_runs_waiting_on_io_keep_every_slot_of_a_worker_of_several_queues_busy(start, client):
    registry = Registry()
    io_bound = define_workflow("io-bound", queue="io", registry=registry)(lambda ctx: gevent.sleep(0.5))
    define_workflow("other", queue="other", registry=registry)(lambda ctx: None)
    client.sync_registry(registry)
    slots = 100
    handles = client.run_many(io_bound, [None] * (2 * slots))
    worker = start(registry, concurrency=slots)
    busiest = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and busiest < slots - 1:
        busiest = max(busiest, worker.in_flight)
        gevent.sleep(0.01)
    assert busiest >= slots - 1  # all of them but the one polling the other queue, well above the limit's floor
    assert worker.board.limit is not None and worker.board.limit.limit == slots
    assert [h.result(timeout=30) for h in handles] == [None] * (2 * slots)


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_runs_that_keep_the_cpu_busy_bring_the_limit_down_and_each_ends_once(start, client):
    registry = Registry()

    def burn(ctx: object) -> int:
        end = time.perf_counter() + 0.002  # 2 ms of CPU without yielding
        while time.perf_counter() < end:
            pass
        return 1

    busy = define_workflow("cpu-bound", queue="cpu", registry=registry)(burn)
    define_workflow("other", queue="other", registry=registry)(lambda ctx: None)
    client.sync_registry(registry)
    slots = 300
    handles = client.run_many(busy, [None] * 1000)  # 2 s of CPU
    worker = start(registry, concurrency=slots)
    limit = worker.board.limit
    assert limit is not None
    limits: list[int] = []  # the limit after each sample (a poll from here would seldom run while the hub is saturated)
    heard = limit.heard
    limit.heard = lambda lag_ms: (heard(lag_ms), limits.append(limit.limit))  # type: ignore[method-assign]
    wait_until(lambda: worker.stats["succeeded"] == len(handles), timeout=60)
    assert min(limits) < slots
    assert [h.result(timeout=30) for h in handles] == [1] * len(handles)
    assert worker.stats["succeeded"] == len(handles) and worker.stats["abandoned"] == 0
