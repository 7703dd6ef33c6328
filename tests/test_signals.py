"""Signals to one run (issue 31 item 2): ``client.signal`` and ``ctx.step.wait_for_signal``,
on a real redis-server with in-process workers.

Invariants (docs/guide/signals.md):
- a signal to a run that has not ended is kept (buffered per run and name)
  until a wait of that name takes it, also one sent before the run waited;
- each wait takes exactly one signal, the oldest of its name; each signal is
  taken by at most one wait, and none kept is lost;
- a signal to a finished, canceled or unknown run returns False and stores nothing;
- a run parked in a wait for the name wakes at once, also when the signal
  comes between the wait's look and the park's settle;
- a wait resolved by a signal replays the same payload (its step's record),
  never taking a second.
"""

from __future__ import annotations

import random

import gevent
import pytest
from helpers import nested, wait_until
from invariants import leftovers

from redflow import InputValidationError, RedflowError, SignalBufferFullError, define_workflow
from redflow.core import codec
from redflow.core.signals import MAX_WAITING_PER_NAME
from redflow.engine import signal_waits
from redflow.store.requests import SignalTake


def parked_in(client, run_id, step):
    run = client.get_run(run_id)
    return run is not None and run.status == "scheduled" and run.parked_for == "signal" and run.parked_step == step


def buffer_of(r, client, run_id):
    return r.hgetall(client.keys.run_signals(run_id))


def define_approver(registry, waits=1, timeout=None, name="approve"):
    """Waits ``waits`` times for signal ``name``; returns the payloads in order."""

    @define_workflow("approver", registry=registry)
    def approver(ctx):
        return [ctx.step.wait_for_signal(name, timeout=timeout) for _ in range(waits)]

    return approver


@pytest.fixture
def later(registry, client):
    """The id of a run that starts in an hour (nothing waits for signals yet)."""

    @define_workflow("later", registry=registry)
    def later_workflow(ctx):
        return 1

    return later_workflow.run(None, client=client, delay=3600).id


# -- buffering and order ------------------------------------------------------------------


def test_signals_sent_before_the_run_waits_are_kept_and_taken_one_per_wait_in_the_order_sent(start, registry, client, r):
    approver = define_approver(registry, waits=3)
    handle = client.run("approver", None, delay=3600)  # not started yet: nothing waits
    assert [client.signal(handle.id, "approve", {"n": n}) for n in range(4)] == [True] * 4
    assert client.signal(handle.id, "other", "kept apart") is True
    r.zadd(client.keys.queue_scheduled("default"), {handle.id: 0})  # due now
    start()
    assert handle.result(10) == [{"n": 0}, {"n": 1}, {"n": 2}]
    steps = {s.name: s for s in client.get_steps(handle.id)}
    assert sorted(steps) == ["signal:approve", "signal:approve#2", "signal:approve#3"]
    assert [steps[name].output for name in sorted(steps)] == [{"n": 0}, {"n": 1}, {"n": 2}]
    # the fourth and the other name's stay, for nobody: the run has ended
    assert buffer_of(r, client, handle.id) == {
        "t:approve": "4", "h:approve": "3", "4:approve": '{"n":3}', "t:other": "1", "1:other": '"kept apart"', "n": "2",
    }  # fmt: skip
    assert approver.name == "approver"


def test_a_parked_run_wakes_at_once_for_each_signal_and_several_waits_on_one_name_take_one_each(start, registry, client, r):
    define_approver(registry, waits=2)
    start()
    handle = client.run("approver")
    wait_until(lambda: parked_in(client, handle.id, "signal:approve"), message="the first wait to park")
    assert client.signal(handle.id, "approve", "first")
    wait_until(lambda: parked_in(client, handle.id, "signal:approve#2"), message="the second wait to park")
    assert client.get_run(handle.id).attempt == 1  # a resume, not a new attempt
    assert client.signal(handle.id, "approve", "second")
    assert handle.result(10) == ["first", "second"]
    assert buffer_of(r, client, handle.id) == {}  # every signal taken: the buffer is gone


def test_a_signal_of_another_name_neither_wakes_nor_resolves_the_wait(start, registry, client, r):
    define_approver(registry, waits=1)
    start()
    handle = client.run("approver")
    wait_until(lambda: parked_in(client, handle.id, "signal:approve"), message="the wait to park")
    assert client.signal(handle.id, "reject", {"why": "no"})
    assert client.get_run(handle.id).status == "scheduled"
    assert client.signal(handle.id, "approve", {"ok": 1})
    assert handle.result(10) == [{"ok": 1}]
    assert buffer_of(r, client, handle.id) == {"t:reject": "1", "1:reject": '{"why":"no"}', "n": "1"}


def test_a_wait_times_out_with_none_and_a_later_signal_is_kept_for_the_next_wait(start, registry, client):
    @define_workflow("approver", registry=registry)
    def approver(ctx):
        first = ctx.step.wait_for_signal("approve", timeout=0.5)
        second = ctx.step.wait_for_signal("approve", timeout=30)
        return [first, second]

    start()
    handle = approver.run(None, client=client)
    wait_until(lambda: parked_in(client, handle.id, "signal:approve#2"), message="the first wait to time out")
    assert client.signal(handle.id, "approve", "late")
    assert handle.result(10) == [None, "late"]


def test_a_signal_sent_between_the_waits_look_and_its_park_wakes_the_run(start, registry, client, monkeypatch):
    define_approver(registry, waits=1, timeout=60)
    real = signal_waits.wait_for_signal
    sent: list[bool] = []

    class SendsAfterTheLook:
        """The host's take_signal, then a signal before the park's settle runs."""

        def __init__(self, host):
            self._host = host

        def __getattr__(self, name):
            return getattr(self._host, name)

        def take_signal(self, take):
            looked = self._host.take_signal(take)
            if looked.state == "waiting" and not sent:
                sent.append(client.signal(self._host.run_id, "approve", {"in": "the window"}))
            return looked

    monkeypatch.setattr(signal_waits, "wait_for_signal", lambda steps, host, *rest: real(steps, SendsAfterTheLook(host), *rest))
    start()
    handle = client.run("approver")
    assert handle.result(10) == [{"in": "the window"}]  # not None after 60 s: the settle woke it
    assert sent == [True]
    assert client.get_run(handle.id).attempt == 1


# -- refused signals ---------------------------------------------------------------------------


def test_a_signal_to_a_finished_canceled_or_unknown_run_returns_false_and_stores_nothing(start, registry, client, r):
    @define_workflow("quick", registry=registry)
    def quick(ctx):
        return 1

    start()
    done = client.run("quick")
    done.result(10)
    canceled = client.run("quick", delay=3600)
    assert client.cancel(canceled.id)
    for run_id in (done.id, canceled.id, "run_missing", ""):
        assert client.signal(run_id, "approve", {"by": "ada"}) is False
    assert r.exists(client.keys.run_signals(done.id), client.keys.run_signals(canceled.id), client.keys.run_signals("run_missing")) == 0


def test_bad_names_and_payloads_are_refused_and_store_nothing(client, r, later):
    for name in ("", None, 7, "x" * 201):
        with pytest.raises(RedflowError, match="signal name|a signal needs"):
            client.signal(later, name, 1)
    with pytest.raises(InputValidationError, match="payload of signal 'approve' is not JSON-serializable"):
        client.signal(later, "approve", {"when": object()})
    with pytest.raises(InputValidationError, match="payload of signal 'approve' is not JSON-serializable"):
        client.signal(later, "approve", nested(300))  # deeper than JSON encoding allows
    assert r.exists(client.keys.run_signals(later)) == 0


def test_a_full_buffer_refuses_the_next_signal_and_keeps_the_others(client, r, later):
    run_id = later
    for n in range(MAX_WAITING_PER_NAME):
        assert client.signal(run_id, "approve", n)
    with pytest.raises(SignalBufferFullError, match="was not stored"):
        client.signal(run_id, "approve", "one too many")
    assert client.signal(run_id, "other", "another name still fits")
    stored = buffer_of(r, client, run_id)
    assert stored["t:approve"] == str(MAX_WAITING_PER_NAME) and stored["n"] == str(MAX_WAITING_PER_NAME + 1)
    assert codec.loads(stored[f"{MAX_WAITING_PER_NAME}:approve"]) == MAX_WAITING_PER_NAME - 1


# -- runs signal ----------------------------------------------------------------------------


def test_runs_signal_sends_a_json_payload_and_says_when_nothing_was_stored(cli, start, registry, client, r):
    define_approver(registry, waits=2)
    start()
    handle = client.run("approver")
    wait_until(lambda: parked_in(client, handle.id, "signal:approve"), message="the wait to park")
    code, out, _ = cli("runs", "signal", handle.id, "approve", '{"by": "ada"}')
    assert code == 0 and out == f"{handle.id}: signal 'approve' kept for the run: its next wait_for_signal('approve') takes it\n"
    wait_until(lambda: parked_in(client, handle.id, "signal:approve#2"), message="the second wait to park")
    code, out, _ = cli("runs", "signal", handle.id, "approve", "--json")  # no payload: null
    assert code == 0 and codec.loads(out) == {"run_id": handle.id, "ok": True, "status": None, "message": codec.loads(out)["message"]}
    assert handle.result(10) == [{"by": "ada"}, None]

    code, out, _ = cli("runs", "signal", handle.id, "approve", "1")
    assert (code, out) == (1, f"{handle.id}: not sent: the run already ended (succeeded); nothing was stored\n")
    code, out, _ = cli("runs", "signal", "run_missing", "approve", "1")
    assert (code, out) == (1, "run_missing: no run run_missing\n")
    code, _, err = cli("runs", "signal", handle.id, "approve", "{not json")
    assert code == 2 and "argument payload: not JSON" in err
    code, _, err = cli("runs", "signal", handle.id, "approve", "[" * 300 + "]" * 300)
    assert code == 2 and "not a payload JSON can store" in err
    code, _, err = cli("runs", "signal", handle.id, "x" * 201)
    assert code == 2 and "argument name: a signal name has at most 200 characters" in err
    assert r.exists(client.keys.run_signals(handle.id), client.keys.run_signals("run_missing")) == 0


def test_runs_signal_to_a_full_buffer_exits_1_and_stores_nothing(cli, client, r, later):
    for n in range(MAX_WAITING_PER_NAME):
        client.signal(later, "approve", n)
    kept = r.hgetall(client.keys.run_signals(later))
    code, _, err = cli("runs", "signal", later, "approve", "1")
    assert code == 1 and err.startswith(f"error: {later}: not sent: run {later} has as many signals waiting as a run keeps")
    assert r.hgetall(client.keys.run_signals(later)) == kept


# -- retention and purge ------------------------------------------------------------------


def test_signals_left_in_a_finished_run_go_with_it_by_retention_and_by_purge(start, registry, client, r, prefix):
    @define_workflow("brief", retention=1, registry=registry)
    def brief(ctx):
        return ctx.step.wait_for_signal("approve")

    @define_workflow("kept", retention=None, registry=registry)
    def kept(ctx):
        return ctx.step.wait_for_signal("approve")

    handles = [brief.run(None, client=client, delay=3600), kept.run(None, client=client, delay=3600)]
    for handle in handles:
        assert client.signal(handle.id, "approve", "taken") and client.signal(handle.id, "approve", "left")
        r.zadd(client.keys.queue_scheduled("default"), {handle.id: 0})
    start(retention_interval_s=0.1)
    assert [handle.result(10) for handle in handles] == ["taken", "taken"]
    assert all(r.hget(client.keys.run_signals(handle.id), "n") == "1" for handle in handles)
    wait_until(lambda: client.get_run(handles[0].id) is None, timeout=10, message="the retention to delete the brief run")
    assert r.exists(client.keys.run_signals(handles[0].id)) == 0
    assert client.purge(older_than=0) == 1  # the run kept forever by retention, deleted by hand
    assert r.exists(client.keys.run_signals(handles[1].id)) == 0
    bounded = {client.keys.retention_cursors()}  # one position per lane, not an entry per run
    assert {key: why for key, why in leftovers(r, client.keys, prefix).items() if key not in bounded} == {}


# -- several workers, concurrent senders, a stale attempt -----------------------------------


def test_three_workers_and_concurrent_senders_give_each_wait_one_signal_in_order_and_lose_none(start, registry, client, r):
    """Invariant: every run's waits take its signals exactly once each, in the order sent, whether a
    signal comes before the run starts, while it runs, in the park window or while it is parked."""
    waits, runs = 6, 24

    @define_workflow("ticker", registry=registry)
    def ticker(ctx):
        taken = []
        for n in range(waits):
            taken.append(ctx.step.wait_for_signal("tick"))
            if n % 2:
                ctx.step.run(f"work-{n}", lambda: gevent.sleep(random.random() * 0.01))
        return taken

    handles = [ticker.run(None, client=client) for _ in range(runs)]
    for handle in handles[: runs // 2]:  # half get their first signal before any worker runs
        client.signal(handle.id, "tick", 0)

    def send(handle, first):
        for n in range(first, waits):
            gevent.sleep(random.random() * 0.02)
            assert client.signal(handle.id, "tick", n)

    for _ in range(3):
        start(concurrency=4)
    senders = [gevent.spawn(send, h, 1 if i < runs // 2 else 0) for i, h in enumerate(handles)]
    gevent.joinall(senders, raise_error=True)
    assert [h.result(30) for h in handles] == [list(range(waits))] * runs
    assert [r.exists(client.keys.run_signals(h.id)) for h in handles] == [0] * runs  # every signal taken, none twice


def test_a_take_by_an_attempt_that_lost_its_lease_is_refused_and_takes_nothing(client, r, later):
    client.signal(later, "approve", "kept")
    kept = r.hgetall(client.keys.run_signals(later))
    r.hset(client.keys.run(later), mapping={"status": "running", "leaseToken": "lease_other"})
    take = SignalTake("signal:approve", "approve", '{"status":"running"}', '{"outputJson":', "}", None, client.now_ms())
    looked = client.scripts.take_signal(run_id=later, queue="default", token="lease_stale", lease_ms=5000, take=take)
    assert looked.state == "stale"
    assert r.hgetall(client.keys.run_signals(later)) == kept and r.hgetall(client.keys.run_steps(later)) == {}
