"""Promise 5: load. Runs of a two-step workflow through two ``-c 500``
worker processes at once: zero lost, zero finalized twice, zero stuck, all
within a bounded time (reported, never asserted on: the machine is shared).
By default a budget of 5,000 runs (id ``bounded``); ``REDFLOW_LONG_TESTS=1``
makes it the long form (id ``long``: 20,000 runs).

And a soak: load while a chaos loop SIGKILLs and replaces workers, drops
every connection and restarts the (persistent) Redis. By default it is a
small bounded run (id ``bounded``); ``REDFLOW_CHAOS_SOAK=1`` makes it the
heavy one (id ``heavy``: 50,000 runs, two minutes of chaos).
"""

import os
import random
import signal
import time
from dataclasses import dataclass

import pytest
from helpers import LONG_TESTS, wait_until

from tests.chaos.harness import alive, restart
from tests.chaos.kit import outputs_disagreeing_with_steps, prove_each_finalized_once, queue_leftovers, terminal_count

PAIR_STEPS = ("first", "second")


def submit_pairs(client, total, batch=2000):
    ids = []
    for start in range(0, total, batch):
        ids.extend(h.id for h in client.run_many("pair", [{}] * min(batch, total - start)))
    return ids


def drained(er, keys):
    return set(queue_leftovers(er, keys, ["default"]).values()) == {0}


#: Runs of the load test: (id, count); the long form with REDFLOW_LONG_TESTS=1 (tests/helpers.py).
LOAD = ("long", 20_000) if LONG_TESTS else ("bounded", 5_000)


@pytest.mark.heavy
@pytest.mark.parametrize("total", [LOAD[1]], ids=[LOAD[0]])
def test_two_step_runs_through_two_500_slot_workers_end_once_each_none_lost_or_stuck(
    total, engine, er, chaos_client, workers, side, witness, report
):
    """5,000 runs (20,000 with REDFLOW_LONG_TESTS=1) submitted in batches of 2,000 while two workers drain them."""
    keys = chaos_client.keys
    pool = [workers.spawn(engine.url, concurrency=500, lease_ms=5000) for _ in range(2)]
    began = time.monotonic()
    ids = submit_pairs(chaos_client, total)
    submitted_s = time.monotonic() - began
    wait_until(lambda: terminal_count(er, keys) >= total, timeout=420, interval=0.5, message=f"{total} runs to end")
    elapsed = time.monotonic() - began
    wait_until(lambda: drained(er, keys), timeout=30, interval=0.5, message="queues and indexes to drain")

    prove_each_finalized_once(er, keys, ids, witness=witness)
    assert outputs_disagreeing_with_steps(er, keys, ids, PAIR_STEPS) == []
    handlers = side.handlers()
    assert set(handlers) == set(ids)  # every run's handler ran (at least once)
    reruns = {name: sum(1 for n in counts.values() if n > 1) for name, counts in
              [("handler", handlers), *((s, side.steps(s)) for s in PAIR_STEPS)]}  # fmt: skip
    assert [w.stop() for w in pool] == [0, 0]
    report(f"{total} runs: submitted in {submitted_s:.1f}s, all ended {elapsed:.1f}s after the first submission "
           f"({total / elapsed:.0f} runs/s); executed more than once: {reruns}")  # fmt: skip


# -- the soak --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SoakPlan:
    name: str
    runs: int
    chaos_s: float
    concurrency: int
    seed: int = 5


BOUNDED = SoakPlan("bounded", runs=3_000, chaos_s=8.0, concurrency=50)
HEAVY = SoakPlan("heavy", runs=50_000, chaos_s=120.0, concurrency=200)
PLAN = HEAVY if os.environ.get("REDFLOW_CHAOS_SOAK") == "1" else BOUNDED


@pytest.mark.heavy
@pytest.mark.engine(persistent=True)
@pytest.mark.parametrize("plan", [PLAN], ids=[PLAN.name])
def test_soak_of_worker_kills_connection_drops_and_redis_restarts_loses_and_double_finalizes_nothing(
    plan, engine, er, chaos_client, workers, side, witness, terminal_watch, report
):
    keys = chaos_client.keys
    rng = random.Random(plan.seed)
    terminal_watch.interval_s = 2.0
    pool = [workers.spawn(engine.url, concurrency=plan.concurrency) for _ in range(2)]
    ids = submit_pairs(chaos_client, plan.runs // 2)
    terminal_watch.add(ids)
    actions: dict[str, int] = {"sigkill": 0, "client-kill": 0, "redis-restart": 0}
    began = time.monotonic()
    while time.monotonic() - began < plan.chaos_s:  # bounded in time; each round sleeps
        time.sleep(rng.uniform(0.5, 1.5))
        action = rng.choice(["sigkill", "sigkill", "client-kill", "client-kill", "redis-restart"])
        actions[action] += 1
        if action == "sigkill":
            victim = pool.pop(rng.randrange(len(pool)))
            victim.proc.send_signal(signal.SIGKILL)
            pool.append(workers.spawn(engine.url, concurrency=plan.concurrency, ready=False))
        elif action == "client-kill":
            er.client_kill_filter(_type="normal")
        else:
            restart(engine, er, down_s=0.5, crash=True)
    more = submit_pairs(chaos_client, plan.runs - len(ids))  # and after the chaos
    terminal_watch.add(more)
    ids += more
    wait_until(lambda: terminal_count(er, keys) >= plan.runs, timeout=120 + plan.runs / 100, interval=0.5,
               message=f"{plan.runs} runs to end")  # fmt: skip
    elapsed = time.monotonic() - began
    wait_until(lambda: drained(er, keys), timeout=30, interval=0.5, message="queues and indexes to drain")

    prove_each_finalized_once(er, keys, ids, witness=witness, watch=terminal_watch, witness_saw_everything=False)
    assert outputs_disagreeing_with_steps(er, keys, ids, PAIR_STEPS) == []
    assert set(side.handlers()) == set(ids)
    assert all(alive(w) for w in pool)
    report(f"{plan.name}: {plan.runs} runs, chaos for {plan.chaos_s:.0f}s {actions}; all ended {elapsed:.1f}s after it began")
