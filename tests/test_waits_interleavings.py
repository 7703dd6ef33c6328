"""Durable waits, script by script, in the orders workers and clients can produce.

Invariants:
- a wait resolves at most once: a delivery lands only on the exact waiting
  record it was registered with, and a resolved step is never overwritten
  (not by a late delivery, a re-park or the timeout);
- a parked run is never lost: it is ``scheduled`` in its queue's scheduled
  zset, or in ready when its wait ended before it parked;
- a parked run resumes as the same attempt;
- a parent parked for its children is woken by exactly its last child's
  report, whether children ended before or after it parked, and a report
  counts once.
"""

from __future__ import annotations

import pytest
from invariants import assert_every_run_ended, drop_prefix, machine_settings, unrecoverable

from redflow import Registry, create_client, define_workflow
from redflow.core import codec
from redflow.core.keys import new_id
from redflow.core.models import WAIT_CHILDREN, WAIT_EVENT, WAIT_SLEEP, Wait, step_succeeded_json, step_waiting_json
from redflow.engine.parking import CANCELED_JSON
from redflow.store.requests import SettleRequest

LEASE_MS = 60_000


@pytest.fixture
def rf(redis_url: str, prefix: str):
    registry = Registry()

    @define_workflow("w", registry=registry)
    def w(ctx):
        return None

    client = create_client(redis_url, prefix=prefix, registry=registry)
    yield client
    client.close()


def running(rf, run_id: str | None = None) -> tuple[str, str, int]:
    """A run taken and started by a slot: (run id, lease token, attempt)."""
    if run_id is None:
        rf.run("w")
    token = new_id("lease")
    claim = rf.scripts.take_run(queue="default", token=token, lease_ms=LEASE_MS, now_ms=rf.now_ms())
    assert claim is not None and claim.start.kind == "started", claim
    assert run_id is None or claim.run_id == run_id
    return claim.run_id, token, claim.start.attempt


def park(rf, run_id, token, reason, step, record, wake_at, *extra):
    request = SettleRequest(run_id, "default", "parked", token, LEASE_MS, rf.now_ms(), error_json=CANCELED_JSON,
                            park=[reason, step, record, str(wake_at), *extra])  # fmt: skip
    return rf.scripts.settle_run(request).status


def event_record(rf, seq=1, timeout_at=None):
    return step_waiting_json(seq, rf.now_ms(), Wait(WAIT_EVENT, event="e", match={}, timeout_at_ms=timeout_at))


def deliver(rf, run_id, step, record, payload):
    resolved = step_succeeded_json(1, 1, rf.now_ms(), codec.dumps(payload))
    return rf.scripts.deliver_event(run_id=run_id, queue="default", step=step, waiting=record, resolved=resolved, now_ms=rf.now_ms())


def stored(r, rf, run_id, step="wait"):
    return r.hget(rf.keys.run_steps(run_id), step)


def test_a_parked_run_is_scheduled_findable_and_unleased_and_resumes_as_the_same_attempt(rf, r):
    run_id, token, attempt = running(rf)
    record = step_waiting_json(1, rf.now_ms(), Wait(WAIT_SLEEP, wake_at_ms=rf.now_ms() - 1))
    assert park(rf, run_id, token, WAIT_SLEEP, "nap", record, rf.now_ms() - 1) == "parked"
    fields = r.hgetall(rf.keys.run(run_id))
    assert fields["status"] == "scheduled" and fields["parkedFor"] == "sleep" and fields["parkedStep"] == "nap"
    assert r.exists(rf.keys.run_lease(run_id)) == 0 and stored(r, rf, run_id, "nap") == record
    assert unrecoverable(r, rf.keys, [run_id]) == {}
    assert rf.scripts.promote_run(run_id=run_id, queue="default", now_ms=rf.now_ms()) == "promoted"
    again, _, resumed_attempt = running(rf, run_id)
    assert resumed_attempt == attempt == 1
    assert not {"parkedFor", "parkedStep", "awaitingChildren"} & set(r.hgetall(rf.keys.run(run_id)))


def test_a_delivery_before_the_waiting_record_is_stored_is_not_counted_and_keeps_the_entry(rf, r):
    run_id, token, _ = running(rf)
    record = event_record(rf)
    assert deliver(rf, run_id, "wait", record, {"early": True}) == "pending"  # emitted before the run waited
    assert park(rf, run_id, token, WAIT_EVENT, "wait", record, rf.now_ms() + LEASE_MS) == "parked"
    assert deliver(rf, run_id, "wait", record, {"n": 1}) == "resumed"
    assert deliver(rf, run_id, "wait", record, {"n": 2}) == "done"  # at most once
    assert codec.loads(codec.loads(stored(r, rf, run_id))["outputJson"]) == {"n": 1}
    assert r.hget(rf.keys.run(run_id), "status") == "queued" and unrecoverable(r, rf.keys, [run_id]) == {}
    assert r.zscore(rf.keys.queue_scheduled("default"), run_id) is None


def test_an_event_delivered_while_the_run_runs_again_wakes_it_at_its_next_park_without_being_overwritten(rf, r):
    run_id, token, _ = running(rf)
    record = event_record(rf)
    assert park(rf, run_id, token, WAIT_EVENT, "wait", record, rf.now_ms() - 1) == "parked"  # its hourly look is due
    assert rf.scripts.promote_run(run_id=run_id, queue="default", now_ms=rf.now_ms()) == "promoted"
    _, token, _ = running(rf, run_id)  # the handler runs again and reaches the wait (its cache holds the waiting record)
    assert deliver(rf, run_id, "wait", record, {"n": 1}) == "delivered"
    resolved = stored(r, rf, run_id)
    assert park(rf, run_id, token, WAIT_EVENT, "wait", record, rf.now_ms() + LEASE_MS) == "woken"
    assert stored(r, rf, run_id) == resolved and r.hget(rf.keys.run(run_id), "status") == "queued"
    assert unrecoverable(r, rf.keys, [run_id]) == {}


def test_a_timeout_that_loses_the_race_to_a_delivery_returns_the_delivered_payload(rf, r):
    run_id, token, _ = running(rf)
    record = event_record(rf, timeout_at=rf.now_ms())
    assert park(rf, run_id, token, WAIT_EVENT, "wait", record, rf.now_ms() - 1) == "parked"
    rf.scripts.promote_run(run_id=run_id, queue="default", now_ms=rf.now_ms())
    _, token, _ = running(rf, run_id)
    assert deliver(rf, run_id, "wait", record, {"won": True}) == "delivered"
    timed_out = step_succeeded_json(1, 1, rf.now_ms(), "null")
    saved = rf.scripts.save_step(run_id=run_id, queue="default", token=token, name="wait", step_json=timed_out, lease_ms=LEASE_MS,
                                 expected=record)  # fmt: skip
    assert saved.state == "changed" and codec.loads(codec.loads(saved.current)["outputJson"]) == {"won": True}
    assert codec.loads(stored(r, rf, run_id))["outputJson"] == '{"won":true}'


def test_a_pending_cancel_turns_a_park_into_a_cancel(rf, r):
    run_id, token, _ = running(rf)
    assert rf.cancel(run_id) is True  # running and leased: requested
    assert park(rf, run_id, token, WAIT_SLEEP, "nap", event_record(rf), rf.now_ms() + LEASE_MS) == "canceled"
    assert r.hget(rf.keys.run(run_id), "status") == "canceled" and r.zscore(rf.keys.queue_scheduled("default"), run_id) is None


def test_a_park_refused_by_the_fence_changes_nothing(rf, r):
    run_id, _, _ = running(rf)
    before = r.hgetall(rf.keys.run(run_id))
    assert park(rf, run_id, new_id("lease"), WAIT_SLEEP, "nap", event_record(rf), rf.now_ms()) == "stale"
    assert r.hgetall(rf.keys.run(run_id)) == before and stored(r, rf, run_id, "nap") is None


def children_record(rf, ids):
    return step_waiting_json(1, rf.now_ms(), Wait(WAIT_CHILDREN, children=tuple(ids)))


def child_ended(rf, child, parent):
    return rf.scripts.child_ended(child_id=child, parent_id=parent, parent_queue="default", now_ms=rf.now_ms())


def test_the_last_child_to_end_wakes_its_parent_whether_others_ended_before_or_after_it_parked(rf, r):
    parent, token, _ = running(rf)
    kids = ["run_a", "run_b", "run_c", "run_d"]
    assert child_ended(rf, "run_a", parent) == "noted"  # ended before the parent parked (it saw it running)
    # The parent saw a, b, c running and d ended (d's report comes late).
    status = park(rf, parent, token, WAIT_CHILDREN, "fan", children_record(rf, kids), rf.now_ms() + LEASE_MS, "3", "run_a", "run_b",
                  "run_c", "run_d")  # fmt: skip
    assert status == "parked" and r.hget(rf.keys.run(parent), "awaitingChildren") == "2"
    assert child_ended(rf, "run_d", parent) == "seen"  # counted as ended at the park: no double count
    assert child_ended(rf, "run_a", parent) == "seen"
    assert child_ended(rf, "run_b", parent) == "waiting"
    assert r.hget(rf.keys.run(parent), "status") == "scheduled"
    assert child_ended(rf, "run_c", parent) == "resumed"
    assert r.hget(rf.keys.run(parent), "status") == "queued" and unrecoverable(r, rf.keys, [parent]) == {}
    assert child_ended(rf, "run_c", parent) == "seen"


def test_a_parent_whose_children_all_ended_before_it_parked_goes_to_ready_at_once(rf, r):
    parent, token, attempt = running(rf)
    for kid in ("run_a", "run_b"):
        child_ended(rf, kid, parent)
    status = park(rf, parent, token, WAIT_CHILDREN, "fan", children_record(rf, ["run_a", "run_b"]), rf.now_ms() + LEASE_MS, "2",
                  "run_a", "run_b")  # fmt: skip
    assert status == "woken" and r.hget(rf.keys.run(parent), "status") == "queued"
    assert r.zscore(rf.keys.queue_scheduled("default"), parent) is None and unrecoverable(r, rf.keys, [parent]) == {}
    assert running(rf, parent)[2] == attempt  # a resume, not a new attempt


# -- the property test: one wait's whole life, in any order ----------------------------------

import uuid  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import redis  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test  # noqa: E402

from redflow.core.keys import TERMINAL_STATUSES  # noqa: E402
from redflow.core.models import STEP_SUCCEEDED  # noqa: E402

ACTORS = ("A", "B")
RUNS = 2


@dataclass
class Slot:
    """A worker slot running a handler that waits in step "wait" then returns."""

    run_id: str | None = None
    token: str = ""
    wait: str | None = None  # the wait's record in the step cache the start loaded
    past_wait: bool = False  # the handler got past its wait (replayed, or ended it)

    def forget(self) -> None:
        self.run_id, self.token, self.wait, self.past_wait = None, "", None, False


class WaitLives(RuleBasedStateMachine):
    """Slots parking, resuming and ending waits; events delivered; time passing; faults."""

    url = ""

    def __init__(self) -> None:
        super().__init__()
        registry = Registry()
        define_workflow("w", registry=registry)(lambda ctx: None)
        self.client = create_client(self.url, prefix=f"rfwait:{uuid.uuid4().hex[:12]}", registry=registry)
        self.r = redis.Redis.from_url(self.url, decode_responses=True)
        self.keys, self.scripts = self.client.keys, self.client.scripts
        self.run_ids = [self.client.run("w").id for _ in range(RUNS)]
        self.slots = {name: Slot() for name in ACTORS}
        self.waits: dict[str, str] = {}  # run id -> the waiting record an event index entry names
        self.resolved: dict[str, str] = {}  # run id -> its wait's first resolved record
        self.attempts: dict[str, int] = {}  # run id -> attempt of its last start

    @rule(actor=st.sampled_from(ACTORS))
    def take(self, actor: str) -> None:
        slot = self.slots[actor]
        head = self.r.lindex(self.keys.queue_ready("default"), -1)
        if slot.run_id is not None or head is None:
            return
        parked, status = self.r.hmget(self.keys.run(head), "parkedFor", "status")
        token = new_id("lease")
        claim = self.scripts.take_run(queue="default", token=token, lease_ms=LEASE_MS, now_ms=self.client.now_ms())
        if claim is not None and claim.start.kind == "cancel":  # a cancel is pending: the worker settles it canceled
            now_ms = self.client.now_ms()
            self.scripts.settle_run(SettleRequest(claim.run_id, "default", "canceled", token, LEASE_MS, now_ms, error_json=CANCELED_JSON))
        if claim is None or claim.start.kind != "started":
            return
        if parked and status == "queued":
            assert claim.start.attempt == self.attempts[claim.run_id], "a parked run resumed as a new attempt"
        self.attempts[claim.run_id] = claim.start.attempt
        slot.run_id, slot.token, slot.wait = claim.run_id, token, claim.start.steps.get("wait")
        slot.past_wait = slot.wait is not None and codec.loads(slot.wait)["status"] == STEP_SUCCEEDED

    @rule(actor=st.sampled_from(ACTORS), reason=st.sampled_from([WAIT_EVENT, WAIT_EVENT, WAIT_SLEEP]), due=st.booleans())
    def park(self, actor: str, reason: str, due: bool) -> None:
        slot = self.slots[actor]
        if slot.run_id is None or slot.past_wait:
            return
        now = self.client.now_ms()
        record = slot.wait or step_waiting_json(1, now, Wait(reason, wake_at_ms=now) if reason == WAIT_SLEEP else Wait(reason))
        status = park(self.client, slot.run_id, slot.token, reason, "wait", record, now - 1 if due else now + LEASE_MS)
        if status in ("parked", "woken") and codec.loads(record)["wait"]["kind"] == WAIT_EVENT:
            self.waits[slot.run_id] = record
        slot.forget()

    @rule(run=st.integers(0, RUNS - 1))
    def deliver(self, run: int) -> None:
        run_id = self.run_ids[run]
        if run_id in self.waits:
            deliver(self.client, run_id, "wait", self.waits[run_id], {"at": self.client.now_ms()})

    @rule(actor=st.sampled_from(ACTORS))
    def end_wait(self, actor: str) -> None:
        """The handler finds its wait over (wake time, timeout) and ends it, unless a delivery did."""
        slot = self.slots[actor]
        if slot.run_id is None or slot.past_wait or slot.wait is None:
            return
        now = self.client.now_ms()
        saved = self.scripts.save_step(run_id=slot.run_id, queue="default", token=slot.token, name="wait",
                                       step_json=step_succeeded_json(1, now, now, "null"), lease_ms=LEASE_MS,
                                       expected=slot.wait)  # fmt: skip
        if saved.state == "stale":
            slot.forget()
        else:
            slot.past_wait = True

    @rule(actor=st.sampled_from(ACTORS))
    def finish(self, actor: str) -> None:
        slot = self.slots[actor]
        if slot.run_id is None or not slot.past_wait:
            return
        self.scripts.settle_run(SettleRequest(slot.run_id, "default", "succeeded", slot.token, LEASE_MS, self.client.now_ms(), "1"))
        slot.forget()

    @rule(ahead=st.booleans())
    def promote(self, ahead: bool = False) -> None:
        now = self.client.now_ms() + (2 * LEASE_MS if ahead else 0)
        for run_id in self.r.zrangebyscore(self.keys.queue_scheduled("default"), "-inf", now):
            self.scripts.promote_run(run_id=run_id, queue="default", now_ms=now)

    @rule(actor=st.sampled_from(ACTORS))
    def crash(self, actor: str) -> None:
        """The slot's worker dies: its lease lapses and the reaper hands the run on."""
        slot = self.slots[actor]
        if slot.run_id is not None:
            self.r.delete(self.keys.run_lease(slot.run_id))
            self.scripts.reap_run(run_id=slot.run_id, queue="default")
        slot.forget()

    @rule(run=st.integers(0, RUNS - 1))
    def cancel(self, run: int) -> None:
        self.client.cancel(self.run_ids[run])

    @invariant()
    def every_run_is_findable_by_recovery(self) -> None:
        assert unrecoverable(self.r, self.keys, self.run_ids) == {}

    @invariant()
    def a_resolved_wait_is_never_overwritten(self) -> None:
        for run_id in self.run_ids:
            record = self.r.hget(self.keys.run_steps(run_id), "wait")
            if record is not None and codec.loads(record)["status"] == STEP_SUCCEEDED:
                first = self.resolved.setdefault(run_id, record)
                assert first == record, f"{run_id}: its resolved wait changed: {first} -> {record}"

    def teardown(self) -> None:
        """Faults stop; time passes; one slot ends every run."""
        try:
            for _ in range(50):
                if all(self.r.hget(self.keys.run(i), "status") in TERMINAL_STATUSES for i in self.run_ids):
                    break
                for actor in ACTORS:
                    self.crash(actor)
                self.promote(ahead=True)
                self.take("A")
                self.end_wait("A")
                self.park("A", WAIT_SLEEP, due=True)
                self.finish("A")
            assert_every_run_ended(self.r, self.keys, self.run_ids)
        finally:
            drop_prefix(self.r, self.client.prefix)
            self.r.close()
            self.client.close()


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_random_interleavings_of_parks_deliveries_wait_ends_and_faults_keep_waits_once_and_runs_findable(redis_url):
    """100 random interleavings of 40 steps (200 with REDFLOW_LONG_TESTS=1), the invariants checked after every step."""
    WaitLives.url = redis_url
    run_state_machine_as_test(WaitLives, settings=machine_settings(bounded_examples=100, long_examples=200, step_count=40))
