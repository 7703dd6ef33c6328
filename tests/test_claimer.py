"""The claimer prototype (redflow/engine/claimer.py, issue 34 phase B): one blocking
wait per queue, slots that wait on a board without talking to Redis.

Slots here are stand-ins: a handed run (already in processing) is settled by
removing it from processing; a marked queue's turn is taken with one LMOVE,
as take_run's claim does, and so is the take of a claimer that found a run
while an idle slot was free (the stand-in :class:`Starter`). Invariant checked throughout: a pushed run is
always in its ready or its processing list until a slot settles it, and is
settled once.
"""

from __future__ import annotations

import gevent
import pytest
import redis
from gevent.event import Event
from helpers import wait_until

from redflow.bench.probe import Probe, server_delta
from redflow.core.keys import Keys
from redflow.engine.board import Board, Work
from redflow.engine.claim import Claimed
from redflow.engine.claimer import Claimers
from redflow.store.slot_connection import SlotConnection


class Starter:
    """The claimers' stand-in starter: a moved run is handed as it is; a take is one LMOVE."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys

    def started(self, conn: SlotConnection, work: Work) -> Claimed | None:
        if work.run_id is not None:
            return Claimed(work.queue, work.run_id, "lease_token")
        ready, processing = self.keys.queue_ready(work.queue), self.keys.queue_processing(work.queue)
        run_id = conn.execute("LMOVE", ready, processing, "RIGHT", "LEFT")
        return None if run_id is None else Claimed(work.queue, run_id, "lease_token", left=int(conn.execute("LLEN", ready)))


class Slots:
    """``count`` stand-in slots on ``board``; ``gate`` (when given) holds each settled run's slot until set."""

    def __init__(self, board: Board, r: redis.Redis, keys: Keys, count: int, gate: Event | None = None) -> None:
        self.board, self.r, self.keys, self.gate = board, r, keys, gate
        self.settled: list[tuple[str, str, str]] = []  # (queue, run id, "claimed" | "taken")
        self.seen_in_processing: list[bool] = []
        self.greenlets = [gevent.spawn(self._slot) for _ in range(count)]

    def _slot(self) -> None:
        while (work := self.board.wait_work()) is not None:
            self._do(work)

    def _do(self, work: Work) -> None:
        ready, processing = self.keys.queue_ready(work.queue), self.keys.queue_processing(work.queue)
        run_id = work.run_id or self.r.lmove(ready, processing, "RIGHT", "LEFT")
        if work.run_id is None:
            self.board.taken(work.queue, left=-1 if run_id is None else self.r.llen(ready))
        if run_id is None:
            return
        self.seen_in_processing.append(run_id in self.r.lrange(processing, 0, -1))
        self.settled.append((work.queue, run_id, "claimed" if work.run_id else "taken"))
        if self.gate is not None:
            self.gate.wait()
        self.r.lrem(processing, 1, run_id)

    def stop(self) -> None:
        gevent.joinall(self.greenlets, timeout=5)


@pytest.fixture
def fleet(redis_url: str, prefix: str, r: redis.Redis):
    """start(queues, slots, timeout_s, gate) -> (claimers, slots); all stopped at teardown."""
    started: list[tuple[Claimers, Slots]] = []
    source = redis.Redis.from_url(redis_url, decode_responses=True, client_name=CLAIMERS_NAME)  # named: counted apart

    def start(queues: list[str], slots: int, *, timeout_s: float = 0.2, gate: Event | None = None) -> tuple[Claimers, Slots]:
        board = Board(queues)
        unblock = lambda blocked: [r.client_unblock(client_id) for _, client_id in blocked]  # noqa: E731
        starter = Starter(Keys(prefix))
        claimers = Claimers(board, Keys(prefix), queues, lambda: SlotConnection(source), unblock, starter, timeout_s=timeout_s)
        stand_ins = Slots(board, r, Keys(prefix), slots, gate)
        started.append((claimers.start(), stand_ins))
        return claimers, stand_ins

    yield start
    for claimers, stand_ins in started:
        if stand_ins.gate is not None:
            stand_ins.gate.set()
        claimers.stop()
        stand_ins.stop()
    source.close()


#: The name of the claimers' connections (CLIENT LIST), so that a test counts theirs alone: a connection
#: another test of the same redis-server left closing or opening is none of theirs.
CLAIMERS_NAME = "test-claimers"


def claimer_connections(probe: Probe) -> int:
    listing = probe.call("CLIENT", "LIST")  # one line per client: "id=7 addr=... name=... ..."
    return sum(1 for line in listing.splitlines() if f" name={CLAIMERS_NAME} " in f" {line} ")


def blocked(probe: Probe) -> int:
    return int(probe.call("INFO", "clients")["blocked_clients"])


@pytest.mark.parametrize("slots", [10, 200])
def test_idle_claimers_send_one_blmove_per_queue_per_timeout_whatever_the_slot_count(fleet, redis_url, slots):
    probe = Probe(redis_url)
    fleet([f"q{i}" for i in range(5)], slots, timeout_s=0.2)
    wait_until(lambda: blocked(probe) == 5)
    before = probe.sample()
    gevent.sleep(1.0)  # five timeouts
    commands = server_delta(before, probe.sample()).commands
    assert sum(commands.values()) <= 5 * 6, commands  # each queue: at most one BLMOVE per timeout, plus the one in flight
    assert claimer_connections(probe) == 5  # one connection per queue, none per slot
    probe.close()


def test_a_run_pushed_to_an_idle_queue_moves_into_processing_and_reaches_one_slot(fleet, r, prefix, redis_url):
    keys = Keys(prefix)
    _, slots = fleet(["a", "b"], 20)
    probe = Probe(redis_url)
    wait_until(lambda: blocked(probe) == 2)
    r.lpush(keys.queue_ready("b"), "run_1")
    wait_until(lambda: slots.settled)
    gevent.sleep(0.1)
    assert slots.settled == [("b", "run_1", "claimed")] and slots.seen_in_processing == [True]
    probe.close()


def test_a_busy_worker_watches_a_queue_without_moving_its_run_and_a_freed_slot_takes_it(fleet, r, prefix, redis_url):
    keys = Keys(prefix)
    gate = Event()
    _, slots = fleet(["a", "b"], 1, gate=gate)
    probe = Probe(redis_url)
    wait_until(lambda: blocked(probe) == 2)
    r.lpush(keys.queue_ready("a"), "run_busy")
    wait_until(lambda: slots.settled)  # the only slot is now busy with it
    r.lpush(keys.queue_ready("b"), "run_waiting")
    gevent.sleep(0.5)
    assert r.lrange(keys.queue_ready("b"), 0, -1) == ["run_waiting"]  # watched, not moved
    assert r.lrange(keys.queue_processing("b"), 0, -1) == []
    gate.set()
    wait_until(lambda: len(slots.settled) == 2)
    assert slots.settled[1] == ("b", "run_waiting", "taken")
    probe.close()


def test_a_run_on_a_watched_queue_unblocks_the_claimer_that_reserved_the_only_idle_slot(fleet, r, prefix, redis_url):
    keys = Keys(prefix)
    claimers, slots = fleet(["a", "b"], 1, timeout_s=30.0)  # without the unblock, the run would wait 30 s
    probe = Probe(redis_url)
    wait_until(lambda: blocked(probe) == 2 and any(c.claiming for c in claimers.claimers))
    watched = next(c.queue for c in claimers.claimers if not c.claiming)
    r.lpush(keys.queue_ready(watched), "run_1")
    wait_until(lambda: slots.settled, timeout=5)
    assert slots.settled == [(watched, "run_1", "taken")]
    probe.close()


def test_stopping_under_load_leaves_every_run_in_ready_or_processing_or_settled_once(fleet, r, prefix):
    keys = Keys(prefix)
    queues = [f"q{i}" for i in range(4)]
    claimers, slots = fleet(queues, 3, timeout_s=0.2)
    pushed = [f"run_{i}" for i in range(300)]

    def produce() -> None:
        for index, run_id in enumerate(pushed):
            r.lpush(keys.queue_ready(queues[index % 4]), run_id)
            if index % 10 == 0:
                gevent.sleep(0.002)

    producer = gevent.spawn(produce)
    gevent.sleep(0.2)
    claimers.stop()
    producer.join()
    slots.stop()
    settled = [run_id for _, run_id, _ in slots.settled]
    left = [run_id for q in queues for key in (keys.queue_ready(q), keys.queue_processing(q)) for run_id in r.lrange(key, 0, -1)]
    assert len(settled) == len(set(settled)) and settled, "a run settled twice, or none before the stop"
    assert sorted(settled + left) == sorted(pushed)
