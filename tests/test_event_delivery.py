"""Event delivery with several workers, against the interleavings that broke it (issue 28).

Invariants (docs/waits.md, "What an event wait promises"):
- every wait resolves at most once, and an event resolves a wait only if the
  wait began (its waiter entry existed) before the event was emitted; a
  scheduled event's time is its fire time, so a late or repeated delivery of
  an old event never resolves a later wait;
- each scheduled event is claimed by one worker and delivered once; a claim
  its worker did not finish (it died) is taken again when the claim ends;
- a wait sees every matching event emitted after its entry exists, also one
  emitted before the park's settle (the worker killed in between:
  tests/chaos/test_waits.py).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from helpers import wait_until

from redflow import define_workflow
from redflow.core.models import scheduled_event_of
from redflow.engine import parking
from redflow.engine.parking import ScheduledEvents
from redflow.store import event_waiters
from redflow.store.events import deliver_scheduled

ROUNDS = 4


def define_listener(registry, rounds=ROUNDS, timeout=15):
    """Waits ``rounds`` times on ``tick`` (steps w0, w1, ...); returns the payloads in order."""

    @define_workflow("listener", registry=registry)
    def listener(ctx):
        return [ctx.step.wait_for_event(f"w{i}", "tick", timeout=timeout) for i in range(rounds)]

    return listener


def waiting_in(client, run_id, step):
    run = client.get_run(run_id)
    return run.status == "scheduled" and run.parked_step == step


def waiting_in_or_past(client, run_id, n):
    """Parked in w<n> or a later wait, or done (a run that got an event twice is ahead)."""
    run = client.get_run(run_id)
    if run.status in ("succeeded", "failed"):
        return True
    return run.status == "scheduled" and run.parked_step is not None and int(run.parked_step[1:]) >= n


@pytest.fixture
def deliveries(monkeypatch):
    """Counts the deliveries of each scheduled event (its id) by every in-process worker."""
    counts: Counter[str] = Counter()
    real = parking.deliver_scheduled

    def counted(store, name, payload_json, *rest):
        counts[payload_json] += 1
        return real(store, name, payload_json, *rest)

    monkeypatch.setattr(parking, "deliver_scheduled", counted)
    return counts


@pytest.fixture
def scheduled_events_by_hand(monkeypatch):
    """The workers' scheduled-events loops do nothing: the test plays them with
    ``play(client, claim_ms)`` -> a function doing one step of a worker's loop."""
    real = ScheduledEvents.step
    monkeypatch.setattr(ScheduledEvents, "step", lambda self: 1.0)

    def play(client, claim_ms):
        events = ScheduledEvents(client.store, claim_ms=claim_ms)
        return lambda: real(events)

    return play


def test_six_workers_deliver_each_scheduled_event_once_and_each_run_gets_each_event_once(start, registry, client, deliveries):
    listener = define_listener(registry)
    for _ in range(6):
        start(concurrency=20)
    handles = [listener.run(None, client=client) for _ in range(40)]
    for n in range(ROUNDS):
        wait_until(lambda n=n: all(waiting_in_or_past(client, h.id, n) for h in handles), timeout=20, message=f"every run to wait in w{n}")
        client.schedule_event("tick", {"n": n}, at=time.time())

    outputs = {h.id: h.result(30) for h in handles}
    assert {run_id: out for run_id, out in outputs.items() if out != [{"n": n} for n in range(ROUNDS)]} == {}
    assert deliveries == {f'{{"n":{n}}}': 1 for n in range(ROUNDS)}  # one worker took each
    wait_until(lambda: client.redis.zcard(client.keys.scheduled_events()) == 0, message="every claim removed")


def test_a_claim_whose_worker_died_is_delivered_by_another_after_the_claim_ends_to_the_waits_begun_before_it_fired(
    start, registry, client, scheduled_events_by_hand
):
    listener = define_listener(registry, rounds=2)
    start()
    early = listener.run(None, client=client)
    wait_until(lambda: waiting_in(client, early.id, "w0"), message="the early run to wait")
    client.schedule_event("tick", {"n": 0}, at=time.time())
    claim = client.scripts.claim_scheduled_events(most=10, claim_ms=300)  # a worker took it, then died
    assert len(claim.events) == 1
    late = listener.run(None, client=client)
    wait_until(lambda: waiting_in(client, late.id, "w0"), message="the late run to wait (after the event fired)")

    other_worker = scheduled_events_by_hand(client, claim_ms=300)
    assert other_worker() > 0.0 and waiting_in(client, early.id, "w0")  # claimed: not taken again meanwhile
    wait_until(lambda: other_worker() == 0.0, message="the claim to end and the event to be taken again")
    wait_until(lambda: waiting_in(client, early.id, "w1"), message="the early run to get the event")
    assert client.get_run(early.id).status == "scheduled" and waiting_in(client, late.id, "w0")  # not the late one
    assert client.redis.zcard(client.keys.scheduled_events()) == 0

    # the dead worker was only frozen: it wakes and delivers its copy after all
    fired = scheduled_event_of(claim.events[0].entry)
    assert fired is not None
    assert deliver_scheduled(client.store, *fired, claim.events[0].fired_at) == []  # both waits now began after it fired
    assert waiting_in(client, early.id, "w1") and waiting_in(client, late.id, "w0")
    client.emit_event("tick", {"n": 1})
    assert early.result(10) == [{"n": 0}, {"n": 1}]
    wait_until(lambda: waiting_in(client, late.id, "w1"), message="the late run to wait again")
    client.emit_event("tick", {"n": 2})
    assert late.result(10) == [{"n": 1}, {"n": 2}]


def test_while_a_dead_workers_claim_lasts_no_later_event_of_its_name_is_delivered_and_the_wait_takes_the_first_that_fired(
    start, registry, client, scheduled_events_by_hand
):
    """The cross-feature model's seed 7 (issue 31): the worker that claimed a round froze; the
    next round, due before its claim ended, was delivered first and the wait took it. A wait
    takes the first matching event that fires after it began: a later one waits for the claim."""
    listener = define_listener(registry, rounds=2)

    @define_workflow("tock-listener", registry=registry)
    def tock_listener(ctx):
        return ctx.step.wait_for_event("t0", "tock", timeout=15)

    start()
    run, other = listener.run(None, client=client), tock_listener.run(None, client=client)
    wait_until(lambda: waiting_in(client, run.id, "w0") and waiting_in(client, other.id, "t0"), message="both runs to wait")
    client.schedule_event("tick", {"n": 0}, at=time.time())
    claim = client.scripts.claim_scheduled_events(most=10, claim_ms=1000)  # a worker took it, then froze
    assert len(claim.events) == 1
    client.schedule_event("tick", {"n": 1}, at=time.time())  # fires after the first, due while its claim lasts
    client.schedule_event("tock", {"n": 1}, at=time.time())  # another name: nothing holds it back

    other_worker = scheduled_events_by_hand(client, claim_ms=1000)
    other_worker()  # takes the tock, and no tick
    assert other.result(10) == {"n": 1}
    assert other_worker() > 0.0 and waiting_in(client, run.id, "w0")  # the tick after the claimed one waits for it
    wait_until(lambda: other_worker() == 0.0, message="the claim to end and the ticks to be taken")
    wait_until(lambda: waiting_in(client, run.id, "w1"), message="the run to take the first tick")
    client.emit_event("tick", {"n": 2})  # the second tick fired before w1 began: it does not count for it
    assert run.result(10) == [{"n": 0}, {"n": 2}]


def test_a_scheduled_event_fires_no_earlier_than_it_was_scheduled(start, registry, client, scheduled_events_by_hand):
    listener = define_listener(registry, rounds=1)
    start()
    handle = listener.run(None, client=client)
    wait_until(lambda: waiting_in(client, handle.id, "w0"), message="the run to wait")
    client.schedule_event("tick", {"past": True}, at=time.time() - 3600)  # "fire now": the wait began before now
    play = scheduled_events_by_hand(client, claim_ms=1000)
    assert play() == 0.0
    assert handle.result(10) == [{"past": True}]


def test_an_event_emitted_between_the_waiter_entry_and_the_park_resumes_the_run_with_it(start, registry, client, monkeypatch):
    listener = define_listener(registry, rounds=1, timeout=3)
    real = event_waiters.register
    emitted: list[list[str]] = []

    def register_then_emit(*args):
        real(*args)
        if not emitted:  # the entry exists, the park's settle has not run yet
            emitted.append(client.emit_event("tick", {"in": "the window"}))

    monkeypatch.setattr(event_waiters, "register", register_then_emit)
    start()
    handle = listener.run(None, client=client)
    assert handle.result(10) == [{"in": "the window"}]
    assert emitted and client.redis.hlen(client.keys.event_waiters("tick")) == 0


def test_the_same_wait_registered_again_keeps_its_entry_and_stamp_a_new_wait_replaces_it(client, r):
    waiter = event_waiters.EventWaiter("run_1", "default", "w0", {}, '{"status":"running","seq":1,"startedAt":1}')
    assert client.scripts.register_waiter(event="tick", run_id="run_1", head=waiter.head()) is True
    first = r.hget(client.keys.event_waiters("tick"), "run_1")
    stored = event_waiters.EventWaiter.from_json("run_1", first)
    assert stored is not None and stored.since is not None and stored.head() == waiter.head()
    assert abs(stored.since - client.now_ms()) < 60_000  # Redis's clock
    assert client.scripts.register_waiter(event="tick", run_id="run_1", head=waiter.head()) is False  # a replay
    assert r.hget(client.keys.event_waiters("tick"), "run_1") == first
    later = event_waiters.EventWaiter("run_1", "default", "w1", {}, '{"status":"running","seq":2,"startedAt":2}')
    assert client.scripts.register_waiter(event="tick", run_id="run_1", head=later.head()) is True
    replaced = event_waiters.EventWaiter.from_json("run_1", r.hget(client.keys.event_waiters("tick"), "run_1"))
    assert replaced is not None and replaced.step == "w1" and replaced.since is not None and replaced.since > stored.since

    # forgetting the ended wait (its head) keeps the newer one; forgetting the newer one drops it
    assert client.scripts.forget_waiters(event="tick", entries=[("run_1", waiter.head())]) == 0
    assert client.scripts.forget_waiters(event="tick", entries=[("run_1", later.head())]) == 1


def test_an_event_scheduled_to_fire_now_right_after_a_wait_began_fires_after_it_within_the_same_millisecond(client, r):
    waiters = client.keys.event_waiters("tick")
    for n in range(50):
        waiter = event_waiters.EventWaiter(f"run_{n}", "default", "w0", {}, f'{{"status":"running","seq":1,"startedAt":{n}}}')
        client.scripts.register_waiter(event="tick", run_id=waiter.run_id, head=waiter.head())
        fire_at = client.scripts.schedule_event(entry=f'{{"id":"e{n}"}}', at_ms=0, conn=None)  # "now": at is past
        stored = event_waiters.EventWaiter.from_json(waiter.run_id, r.hget(waiters, waiter.run_id))
        assert stored is not None and stored.began_before(fire_at), (stored.since, fire_at)


def test_a_scheduled_event_that_cannot_be_read_is_dropped_and_holds_back_none_claimed_with_it(
    start, registry, client, r, scheduled_events_by_hand, caplog
):
    listener = define_listener(registry, rounds=1)
    start()
    handle = listener.run(None, client=client)
    wait_until(lambda: waiting_in(client, handle.id, "w0"), message="the run to wait")
    past = client.now_ms() - 1000
    r.zadd(client.keys.scheduled_events(), {"not json": past, '{"id":"e1","event":"tick","payloadJson":"{broken"}': past})
    client.schedule_event("tick", {"ok": True}, at=time.time())
    play = scheduled_events_by_hand(client, claim_ms=1000)
    assert play() == 0.0
    assert handle.result(10) == [{"ok": True}]
    assert r.zcard(client.keys.scheduled_events()) == 0
    dropped = [rec.getMessage() for rec in caplog.records if "dropped a scheduled event" in rec.getMessage()]
    assert len(dropped) == 2 and "not json" in dropped[0] + dropped[1] and "{broken" in dropped[0] + dropped[1]
