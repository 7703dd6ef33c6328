"""Promise 1 under fire: several worker processes on one Redis, a chaos loop
that SIGKILLs (and replaces) a random worker or freezes one past its lease
(SIGSTOP, then SIGCONT: a starved process that wakes and carries on), while
thousands of three-step runs go through.

This is the order of events that used to leave runs ``running`` forever (a
frozen attempt retaking its lapsed lease while a second claim of the same
run found it "busy" and dropped its only processing entry). Checked while
the chaos goes on: the recovery invariant (tests/invariants.py) in atomic
snapshots; at the end: every run terminal and finalized exactly once,
nothing left in any queue, and run outputs that agree with the stored steps.
Bounded in count and time for CI; ``REDFLOW_CHAOS_SOAK=1`` runs the heavy
version (six workers x ``-c 100``, 30,000 runs, three minutes of chaos).
"""

import os
import random
import signal
import time
from dataclasses import dataclass

import pytest
from helpers import wait_until
from invariants import unrecoverable

from tests.chaos.harness import alive
from tests.chaos.kit import outputs_disagreeing_with_steps, prove_each_finalized_once, queue_leftovers, terminal_count

STEPS = ("a", "b", "c")


@dataclass(frozen=True)
class KillLoop:
    name: str
    workers: int
    concurrency: int
    runs: int
    chaos_s: float
    lease_ms: int = 1000
    nap_s: float = 0.05  # per step: runs stay in flight long enough to be caught by the chaos
    seed: int = 12


BOUNDED = KillLoop("bounded", workers=4, concurrency=50, runs=3_000, chaos_s=10.0)
HEAVY = KillLoop("heavy", workers=6, concurrency=100, runs=30_000, chaos_s=180.0, lease_ms=2000)
PLAN = HEAVY if os.environ.get("REDFLOW_CHAOS_SOAK") == "1" else BOUNDED


@pytest.mark.heavy
@pytest.mark.parametrize("plan", [PLAN], ids=[PLAN.name])
def test_workers_killed_and_frozen_past_their_leases_under_load_leave_no_run_stuck_or_finalized_twice(
    plan, engine, er, chaos_client, workers, witness, report
):
    keys = chaos_client.keys
    rng = random.Random(plan.seed)

    def spawn(ready: bool = True):
        return workers.spawn(engine.url, concurrency=plan.concurrency, lease_ms=plan.lease_ms, ready=ready)

    pool = [spawn() for _ in range(plan.workers)]
    ids: list[str] = []
    # Runs keep arriving through the whole chaos (about one wave per round), so that it always has runs to hit.
    wave = max(200, plan.runs // max(1, int(plan.chaos_s / 0.8)))

    def submit(count: int) -> None:
        for start in range(0, count, 1000):
            ids.extend(h.id for h in chaos_client.run_many("journey", [{"nap_s": plan.nap_s}] * min(1000, count - start)))

    submit(min(plan.runs, 4 * wave))
    actions = {"sigkill": 0, "freeze": 0}
    snapshots = 0
    began = time.monotonic()
    while time.monotonic() - began < plan.chaos_s:
        submit(min(wave, plan.runs - len(ids)))
        victim = rng.randrange(len(pool))
        if rng.random() < 0.5:
            actions["sigkill"] += 1
            pool.pop(victim).proc.send_signal(signal.SIGKILL)
            pool.append(spawn(ready=False))
            time.sleep(rng.uniform(0.2, 0.6))
        else:  # starved past its lease: others take its runs over, then it wakes and goes on
            actions["freeze"] += 1
            pool[victim].signal(signal.SIGSTOP)
            time.sleep(plan.lease_ms / 1000 * rng.uniform(1.2, 2.0))
            pool[victim].signal(signal.SIGCONT)
        assert unrecoverable(er, keys, ids) == {}
        snapshots += 1
    submit(plan.runs - len(ids))
    wait_until(lambda: terminal_count(er, keys) >= plan.runs, timeout=120 + plan.runs / 50, interval=0.5,
               message=f"{plan.runs} runs to end")  # fmt: skip
    elapsed = time.monotonic() - began
    wait_until(lambda: set(queue_leftovers(er, keys, ["default"]).values()) == {0}, timeout=30, interval=0.5,
               message="queues and indexes to drain")  # fmt: skip

    prove_each_finalized_once(er, keys, ids, witness=witness)
    assert outputs_disagreeing_with_steps(er, keys, ids, STEPS) == []
    assert all(alive(w) for w in pool)
    report(f"{plan.name}: {plan.workers} workers x -c {plan.concurrency}, {plan.runs} runs, {actions} in "
           f"{plan.chaos_s:.0f}s, invariant held in {snapshots} snapshots; all ended {elapsed:.1f}s after the chaos began")  # fmt: skip
