"""No run is lost, whatever the interleaving: the recovery invariant.

Invariant (tests/invariants.py): a ``queued`` or ``running`` run is always
in its queue's ready or processing list, and a ``scheduled`` run in its
scheduled zset, so that a worker, the reaper or the promoter finds it.

Proved three ways against a real redis-server, with the engine's own
scripts called one at a time in the orders workers can produce:

* the seven-step interleaving that left runs ``running`` forever (a lease
  retaken by a starved attempt, a second claim finding it "busy" and
  removing the only processing entry, the holder dying);
* a property test (hypothesis' stateful testing) that drives random
  interleavings of claim, start, step records (which may retake a lapsed
  lease), keeper renewals and markers, settle, lease lapses, kills, the
  reaper, the promoter, the sweeper, inline claims, cancel and retry, and
  checks the invariant after every step, that a terminal run never changes
  again (but by a retry), and that once the faults stop every run ends;
* runs orphaned the way older versions left them, which the sweeper,
  ``cancel`` and ``retry`` each recover.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from invariants import assert_every_run_ended, drop_prefix, machine_settings, unrecoverable

from redflow import Registry, create_client, define_workflow
from redflow.core import codec
from redflow.core.keys import TERMINAL_STATUSES, new_id
from redflow.core.models import step_succeeded_json
from redflow.store.replies import StartReply
from redflow.store.requests import SettleRequest, StartRequest

LONG_LEASE_MS = 60_000  # leases lapse only when a test says so


def _workflows() -> Registry:
    registry = Registry()

    @define_workflow("two-steps", registry=registry)
    def two_steps(ctx):
        a = ctx.step.run("a", lambda: "a")
        b = ctx.step.run("b", lambda: "b")
        return {"a": a, "b": b}

    return registry


def _claim(r: redis.Redis, keys, queue: str = "default") -> str | None:
    """What a slot's LMOVE does: ready -> processing."""
    return r.lmove(keys.queue_ready(queue), keys.queue_processing(queue), "RIGHT", "LEFT")


def _step_json(client, seq: int, output: str) -> str:
    now = client.now_ms()
    return step_succeeded_json(seq, now, now, codec.dumps(output))


@pytest.fixture
def registry() -> Registry:
    """This module's workflows: the conftest's ``client`` and ``start`` use them."""
    return _workflows()


def test_the_seven_step_interleaving_leaves_the_run_findable_and_a_worker_then_finishes_it(client, r, start):
    keys, scripts = client.keys, client.scripts
    run_id = client.run("two-steps").id
    lease = keys.run_lease(run_id)
    ta, tb = new_id("lease"), new_id("lease")
    common = {"run_id": run_id, "queue": "default", "lease_ms": LONG_LEASE_MS}

    # 1. slot A claims R and starts it
    assert _claim(r, keys) == run_id
    assert scripts.start_run(StartRequest(run_id, "default", ta, LONG_LEASE_MS, client.now_ms())).kind == "started"
    # 2. A is starved past its lease; the lease expires
    r.delete(lease)
    # 3. a reaper sees R in processing without a lease and moves it to ready
    assert scripts.reap_run(run_id=run_id, queue="default")
    # 4. slot B claims R
    assert _claim(r, keys) == run_id
    # 5. A wakes and records a step: nobody holds the lease and R is in processing, so A retakes it
    state = scripts.save_step(**common, token=ta, name="a", step_json=_step_json(client, 1, "a")).state
    assert state == "saved" and r.get(lease) == ta
    # 6. B's start finds the lease held by A: "busy", and R's processing entry stays
    assert scripts.start_run(StartRequest(run_id, "default", tb, LONG_LEASE_MS, client.now_ms())).kind == "busy"
    assert r.lpos(keys.queue_processing("default"), run_id) is not None
    # 7. A goes away before settling: its lease lapses
    r.delete(lease)

    assert unrecoverable(r, keys, [run_id]) == {}
    start(concurrency=2)  # its reaper returns R to ready, a slot finishes it, replaying step a
    assert client.wait_for(run_id, timeout=10).outcome() == {"a": "a", "b": "b"}


def _orphan(r: redis.Redis, client) -> str:
    """A run as older versions could leave it: running, no lease, in no list."""
    run_id = client.run("two-steps").id
    keys = client.keys
    assert _claim(r, keys) == run_id
    assert client.scripts.start_run(StartRequest(run_id, "default", new_id("lease"), LONG_LEASE_MS, client.now_ms())).kind == "started"
    r.delete(keys.run_lease(run_id))
    r.lrem(keys.queue_processing("default"), 0, run_id)
    assert unrecoverable(r, keys, [run_id]) == {run_id: "running but in neither ready nor processing"}
    return run_id


def test_the_sweeper_returns_a_run_older_versions_orphaned_and_a_worker_finishes_it(client, r, start):
    run_id = _orphan(r, client)
    worker = start(sweep_interval_s=0.1)
    assert client.wait_for(run_id, timeout=10).outcome() == {"a": "a", "b": "b"}
    assert worker.sweeper.repaired == 1


def test_cancel_ends_a_running_run_nobody_holds_at_once(client, r):
    run_id = _orphan(r, client)
    assert client.cancel(run_id, reason="stuck") is True
    run = client.get_run(run_id)
    assert run.status == "canceled" and run.cancel_reason == "stuck"
    assert r.zscore(client.keys.runs_status("running"), run_id) is None


def test_cancel_of_a_running_run_whose_lease_is_held_only_asks_its_worker(client, r):
    run_id = client.run("two-steps").id
    assert _claim(r, client.keys) == run_id
    client.scripts.start_run(StartRequest(run_id, "default", new_id("lease"), LONG_LEASE_MS, client.now_ms()))
    assert client.cancel(run_id) is True
    run = client.get_run(run_id)
    assert run.status == "running" and run.cancel_requested_at is not None


def test_retry_requeues_a_stuck_running_run_and_a_worker_finishes_it(client, r, start):
    run_id = _orphan(r, client)
    assert client.retry(run_id) is True
    assert unrecoverable(r, client.keys, [run_id]) == {}
    start()
    assert client.wait_for(run_id, timeout=10).outcome() == {"a": "a", "b": "b"}


def test_retry_refuses_a_running_run_a_live_worker_holds_and_says_why(client, r):
    from redflow.ops.control.runs import retry_run

    run_id = client.run("two-steps").id
    assert _claim(r, client.keys) == run_id
    client.scripts.start_run(StartRequest(run_id, "default", new_id("lease"), LONG_LEASE_MS, client.now_ms()))
    result = retry_run(client, run_id)
    assert result.ok is False and "a live worker holds it" in result.message
    assert r.lpos(client.keys.queue_processing("default"), run_id) == 0  # untouched


# -- the property test ----------------------------------------------------------------

ACTORS = ("A", "B", "C")
RUNS = 3


@dataclass
class Slot:
    """What one worker slot knows: the run it claimed, its token, how far it got."""

    run_id: str | None = None
    token: str = ""
    phase: str = "idle"  # idle | claimed | running | canceling
    seq: int = 0

    def forget(self) -> None:
        self.run_id, self.token, self.phase, self.seq = None, "", "idle", 0


class Interleavings(RuleBasedStateMachine):
    """Workers, reapers, promoters and clients acting on three runs in any order."""

    url = ""

    def __init__(self) -> None:
        super().__init__()
        self.client = create_client(self.url, prefix=f"rfprop:{uuid.uuid4().hex[:12]}", registry=_workflows())
        self.r = redis.Redis.from_url(self.url, decode_responses=True)
        self.keys, self.scripts = self.client.keys, self.client.scripts
        self.run_ids = [self.client.run("two-steps").id for _ in range(RUNS)]
        self.slots = {name: Slot() for name in ACTORS}
        self.first_terminal: dict[str, tuple[str, str]] = {}
        self.purged: set[str] = set()  # runs a subclass's purge deleted (finished, then gone)

    # -- a slot: claim, start, steps, keeper, settle ----------------------------------
    @rule(actor=st.sampled_from(ACTORS))
    def claim(self, actor: str) -> None:
        slot = self.slots[actor]
        if slot.phase == "idle":
            run_id = _claim(self.r, self.keys)
            if run_id:
                slot.run_id, slot.token, slot.phase = run_id, new_id("lease"), "claimed"

    @rule(actor=st.sampled_from(ACTORS), run=st.integers(0, RUNS - 1))
    def inline_claim(self, actor: str, run: int) -> None:
        """A parent's inline assist: a queued child, ready -> processing, in this slot."""
        slot = self.slots[actor]
        run_id = self.run_ids[run]
        if slot.phase == "idle" and self.scripts.claim_queued_run_for_inline(run_id=run_id, queue="default"):
            slot.run_id, slot.token, slot.phase = run_id, new_id("lease"), "claimed"

    @rule(actor=st.sampled_from(ACTORS))
    def start(self, actor: str) -> None:
        slot = self.slots[actor]
        if slot.phase != "claimed":
            return
        reply = self.scripts.start_run(StartRequest(slot.run_id, "default", slot.token, LONG_LEASE_MS, self.client.now_ms()))
        self._started(slot, reply)

    @rule(actor=st.sampled_from(ACTORS))
    def take(self, actor: str) -> None:
        """Claim and start in one call (a multi-queue worker's probe)."""
        slot = self.slots[actor]
        if slot.phase != "idle":
            return
        token = new_id("lease")
        claim = self.scripts.take_run(queue="default", token=token, lease_ms=LONG_LEASE_MS, now_ms=self.client.now_ms())
        if claim is not None:
            slot.run_id, slot.token = claim.run_id, token
            self._started(slot, claim.start)

    def _started(self, slot: Slot, reply: StartReply) -> None:
        if reply.kind == "started":
            slot.phase = "running"
            slot.seq = len(reply.steps)
        elif reply.kind == "cancel":
            slot.phase = "canceling"  # the worker settles it canceled at once
        else:
            slot.forget()

    @rule(actor=st.sampled_from(ACTORS), release=st.booleans())
    def record_step(self, actor: str, release: bool) -> None:
        """A step's final record: may retake a lapsed lease nobody took over."""
        slot = self.slots[actor]
        if slot.phase != "running":
            return
        slot.seq += 1
        state = self.scripts.save_step(run_id=slot.run_id, queue="default", token=slot.token, name=f"s{slot.seq}",
                                       step_json=_step_json(self.client, slot.seq, "x"), lease_ms=LONG_LEASE_MS).state  # fmt: skip
        if state == "stale":
            self._abandon(slot, release)

    @rule(actor=st.sampled_from(ACTORS), release=st.booleans())
    def keeper(self, actor: str, release: bool) -> None:
        """The lease keeper's renewal and a running marker: never retake a lease."""
        slot = self.slots[actor]
        if slot.phase != "running":
            return
        renewed = self.scripts.renew_run_lease(run_id=slot.run_id, queue="default", token=slot.token, lease_ms=LONG_LEASE_MS)
        state = self.scripts.save_step(run_id=slot.run_id, queue="default", token=slot.token, name="long",
                                       step_json='{"status":"running","seq":99,"startedAt":1}', lease_ms=LONG_LEASE_MS,
                                       marker_started_at_ms=1).state  # fmt: skip
        if not renewed or state == "stale":
            self._abandon(slot, release)

    @rule(
        actor=st.sampled_from(ACTORS),
        outcome=st.sampled_from(["succeeded", "failed", "canceled", "scheduled"]),
        check_lease=st.booleans(),
        then_next=st.booleans(),
    )
    def settle(self, actor: str, outcome: str, check_lease: bool = True, then_next: bool = False) -> None:
        """End the attempt; the worker reads the lease key too only when its own may have
        lapsed (so both are tried), and may claim and start the next run in the same call."""
        slot = self.slots[actor]
        if slot.phase not in ("running", "canceling"):
            return
        outcome = "canceled" if slot.phase == "canceling" else outcome
        now = self.client.now_ms()
        next_token = new_id("lease") if then_next else ""
        settled = self.scripts.settle_run(
            SettleRequest(slot.run_id, "default", outcome, slot.token, LONG_LEASE_MS, now, output_json="1",
                          error_json='{"name":"E","message":"m","kind":"error"}', retry_at_ms=now - 1, check_lease=check_lease,
                          cleanup=True, next_token=next_token)
        )  # fmt: skip
        if settled.status == "stale":
            self._abandon(slot, release=True)
        slot.forget()
        if settled.next is not None:
            slot.run_id, slot.token = settled.next.run_id, next_token
            self._started(slot, settled.next.start)

    def _abandon(self, slot: Slot, release: bool) -> None:
        """What an attempt that lost its lease does: release it if it is still its own, then stop."""
        if release:
            self.scripts.release_run_lease(run_id=slot.run_id, queue="default", token=slot.token)
        slot.forget()

    # -- faults ---------------------------------------------------------------------
    @rule(actor=st.sampled_from(ACTORS))
    def lapse(self, actor: str) -> None:
        """The slot is starved (GC, SIGSTOP, CPU) past its lease: the lease expires."""
        slot = self.slots[actor]
        if slot.run_id and self.r.get(self.keys.run_lease(slot.run_id)) == slot.token:
            self.r.delete(self.keys.run_lease(slot.run_id))

    @rule(actor=st.sampled_from(ACTORS))
    def kill(self, actor: str) -> None:
        """SIGKILL: the slot forgets everything and releases nothing."""
        self.slots[actor].forget()

    # -- the worker's loops and the clients -----------------------------------------
    @rule()
    def reap(self) -> None:
        """One reaper scan (without the two-scan delay: harsher than the real one)."""
        for run_id in set(self.r.lrange(self.keys.queue_processing("default"), 0, -1)):
            if not self.r.exists(self.keys.run_lease(run_id)):
                self.scripts.reap_run(run_id=run_id, queue="default")

    @rule()
    def promote(self) -> None:
        now = self.client.now_ms()
        for run_id in self.r.zrangebyscore(self.keys.queue_scheduled("default"), "-inf", now):
            self.scripts.promote_run(run_id=run_id, queue="default", now_ms=now)

    @rule()
    def sweep(self) -> None:
        for run_id in self.r.zrange(self.keys.runs_status("running"), 0, -1):
            self.scripts.repair_orphan(run_id=run_id, queue="default")

    @rule(run=st.integers(0, RUNS - 1))
    def cancel(self, run: int) -> None:
        self.client.cancel(self.run_ids[run])

    @rule(run=st.integers(0, RUNS - 1))
    def retry(self, run: int) -> None:
        if self.client.retry(self.run_ids[run]):
            self.first_terminal.pop(self.run_ids[run], None)  # a retried run may end again

    # -- what must hold after every step ---------------------------------------------
    @invariant()
    def every_live_run_is_findable_by_recovery(self) -> None:
        assert unrecoverable(self.r, self.keys, self.run_ids) == {}

    @invariant()
    def a_terminal_run_never_changes_but_by_a_retry(self) -> None:
        for run_id in self.run_ids:
            status, finished_at = self.r.hmget(self.keys.run(run_id), "status", "finishedAt")
            if status not in TERMINAL_STATUSES:
                assert run_id not in self.first_terminal, f"{run_id} left {self.first_terminal.get(run_id)} for {status}"
                continue
            seen = self.first_terminal.setdefault(run_id, (status, finished_at))
            assert seen == (status, finished_at), f"{run_id} finalized again: {seen} -> {(status, finished_at)}"

    def ended(self) -> None:
        """What must hold once every run ended (a subclass's own end state)."""

    def teardown(self) -> None:
        """Once the faults stop, the reaper, the promoter and one healthy slot end every run."""
        try:
            healthy = Slot()
            for _ in range(200):
                if all(self.r.hget(self.keys.run(i), "status") in TERMINAL_STATUSES for i in self.run_ids if i not in self.purged):
                    break
                for slot in self.slots.values():  # every earlier holder is dead: their leases lapse
                    slot.forget()
                self.r.delete(*(self.keys.run_lease(i) for i in self.run_ids))
                self.reap()
                self.promote()
                self.slots["A"] = healthy
                self.claim("A")
                self.start("A")
                self.settle("A", "succeeded")
                healthy.forget()
            assert_every_run_ended(self.r, self.keys, [i for i in self.run_ids if i not in self.purged])
            self.ended()
        finally:
            drop_prefix(self.r, self.client.prefix)
            self.r.close()
            self.client.close()


#: The state machines' budget (also tests/test_flow_control_invariant.py's): reproducible, bounded.
PROPERTY_SETTINGS = machine_settings(bounded_examples=75, long_examples=150, step_count=40)


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_random_interleavings_of_every_script_keep_every_run_findable_and_end_each_run(redis_url):
    """75 random interleavings of 40 steps (150 with REDFLOW_LONG_TESTS=1), the invariants checked after every step."""
    Interleavings.url = redis_url
    run_state_machine_as_test(Interleavings, settings=PROPERTY_SETTINGS)
