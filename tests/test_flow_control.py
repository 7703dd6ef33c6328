"""Concurrency and rate limits in one process: what a limit does to a run
(held, not failed; no slot kept; canceled, retried, recovered), what it
costs when unused, and bad limits and bad input refused clearly.

The fleet tests (worker subprocesses, side-channel counts) are in
tests/test_flow_control_fleet.py.
"""

from __future__ import annotations

import gevent
import pytest
from gevent.event import Event
from helpers import wait_until
from invariants import unrecoverable
from test_hot_path_budget import drain_counts

from redflow import Concurrency, RateLimit, Registry, create_client, define_workflow
from redflow.bench.probe import Probe, server_delta
from redflow.core.errors import InputValidationError, RedflowError
from redflow.core.models import RunField, WorkflowField
from redflow.engine.limits import FlowSweeper


def _gate_workflow(registry: Registry, name: str = "gated", **limits):
    """A workflow whose runs wait for ``gates[input["gate"]]`` (an Event), counting who runs."""
    gates: dict[str, Event] = {}
    running: list[str] = []
    peak = [0]

    @define_workflow(name, registry=registry, max_attempts=1, **limits)
    def gated(ctx):
        running.append(ctx.run.id)
        peak[0] = max(peak[0], len(running))
        try:
            gates.setdefault(ctx.input["gate"], Event()).wait(30)
            if ctx.input.get("fail"):
                raise RuntimeError("told to fail")
            return ctx.input["gate"]
        finally:
            running.remove(ctx.run.id)

    return gated, gates, running, peak


def _open(gates: dict[str, Event], name: str) -> None:
    gates.setdefault(name, Event()).set()


def _hold_the_sweep_lock(client) -> None:
    """Keep the workers' limits sweepers out (as if another worker swept this interval):
    a held run then stays held, whenever their passes come, until the test's ``_sweep``."""
    client.redis.set(client.keys.lock_limits(), "held-by-the-test", px=60_000)


def _sweep(client) -> None:
    """One sweeper pass now, the test's: it lets the sweep lock go first."""
    client.redis.delete(client.keys.lock_limits())
    FlowSweeper(client.store, ["default"], interval_s=0.01).step()


# -- defining limits ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": [Concurrency(limit=2), Concurrency(limit=3)]}, "at most one Concurrency without key"),
        ({"concurrency": [{"limit": 2}]}, "takes Concurrency"),
        ({"rate_limit": {"limit": 2, "period": 1}}, "takes a RateLimit"),
    ],
)
def test_bad_limit_declarations_are_refused_at_definition(options, message):
    with pytest.raises(RedflowError, match=message):
        define_workflow("bad", registry=Registry(), **options)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Concurrency(limit=0), "limit must be an int >= 1"),
        (lambda: Concurrency(limit=True), "limit must be an int >= 1"),
        (lambda: Concurrency(limit=2, key="customer"), "key must be a function"),
        (lambda: RateLimit(limit=5, period=0), "period must be a number of seconds"),
        (lambda: RateLimit(limit=5, period=float("nan")), "period must be a number of seconds"),
    ],
)
def test_bad_limit_values_are_refused(make, message):
    with pytest.raises(RedflowError, match=message):
        make()


def test_a_key_function_that_fails_on_the_input_refuses_the_run_and_enqueues_nothing(client, registry, r):
    @define_workflow("keyed", registry=registry, concurrency=[Concurrency(limit=2, key=lambda input: input["customer"])])
    def keyed(ctx):
        return None

    with pytest.raises(InputValidationError, match="key= raised on the input: KeyError"):
        client.run(keyed, {"no": "customer"})
    with pytest.raises(InputValidationError, match="key= must return a str or an int, got dict"):
        client.run(keyed, {"customer": {"id": 1}})
    assert r.zcard(client.keys.runs_created()) == 0


def test_runs_of_unlimited_workflows_carry_no_flow_fields_and_limited_ones_carry_their_limits(client, registry, r):
    @define_workflow("plain", registry=registry)
    def plain(ctx):
        return None

    @define_workflow("capped", registry=registry, concurrency=[Concurrency(limit=3)], rate_limit=RateLimit(limit=10, period=60))
    def capped(ctx):
        return None

    client.sync_registry(registry)
    fields = r.hgetall(client.keys.run(client.run(plain).id))
    assert not {RunField.LIMITS_JSON, RunField.PRIORITY, RunField.HELD_BY} & set(fields)
    limits = r.hget(client.keys.run(client.run(capped).id), RunField.LIMITS_JSON)
    assert client.keys.workflow_running("capped") in limits and client.keys.rate_window("capped", None) in limits
    # the asyncio package's field for the workflow-wide limit, and what views show
    assert r.hget(client.keys.workflow("capped"), WorkflowField.MAX_CONCURRENCY) == "3"
    assert r.hget(client.keys.workflow("plain"), WorkflowField.MAX_CONCURRENCY) is None


# -- held runs ----------------------------------------------------------------------------


def test_a_held_run_keeps_no_slot_so_other_workflows_on_the_queue_keep_flowing(start, client, registry, r):
    gated, gates, running, peak = _gate_workflow(registry, concurrency=[Concurrency(limit=1)])

    @define_workflow("free", registry=registry)
    def free(ctx):
        return ctx.input

    start(concurrency=2)
    held = [gated.run({"gate": "g"}, client=client) for _ in range(5)]
    wait_until(lambda: len(running) == 1)
    others = [free.run(i, client=client) for i in range(20)]
    assert [h.result(10) for h in others] == list(range(20))  # through the one free slot, past 4 held runs
    assert r.scard(client.keys.limit_waiting("gated")) == 4
    assert {h.status() for h in held} == {"running", "queued"}
    _open(gates, "g")
    assert [h.result(10) for h in held] == ["g"] * 5
    assert peak[0] == 1
    assert r.get(client.keys.workflow_running("gated")) == "0" and r.scard(client.keys.limit_waiting("gated")) == 0


def test_held_runs_cost_redis_nothing_while_they_wait(start, client, registry, redis_url):
    """No spinning: while 400 runs wait for a unit, Redis sees only the worker's
    background loops, not work per held run."""
    gated, gates, running, _ = _gate_workflow(registry, concurrency=[Concurrency(limit=1)])
    start(concurrency=8)
    handles = client.run_many(gated, [{"gate": "g"} for _ in range(401)])
    wait_until(lambda: client.redis.scard(client.keys.limit_waiting("gated")) == 400, timeout=20)
    probe = Probe(redis_url)
    before = probe.sample()
    gevent.sleep(1.0)
    delta = server_delta(before, probe.sample())
    probe.close()
    commands = sum(delta.commands.values())
    print(f"400 held runs, 1 s: {commands} commands {dict(delta.commands)}")
    assert commands / 400 < 0.5, delta.commands  # per held run per second
    _open(gates, "g")
    wait_until(lambda: client.count_runs("succeeded") == 401, timeout=60)
    assert all(h.status() == "succeeded" for h in handles)


def test_a_held_run_can_be_canceled_and_leaves_nothing_behind(start, client, registry, r):
    gated, gates, running, _ = _gate_workflow(registry, concurrency=[Concurrency(limit=1)])
    start(concurrency=4)
    first = gated.run({"gate": "first"}, client=client)
    wait_until(lambda: len(running) == 1)
    held = gated.run({"gate": "held"}, client=client)
    after = gated.run({"gate": "after"}, client=client)
    wait_until(lambda: r.scard(client.keys.limit_waiting("gated")) == 2)
    assert held.status() == "queued"
    assert client.cancel(held.id, reason="not needed") is True
    assert held.status() == "canceled"
    assert r.lrange(client.keys.limit_held("gated"), 0, -1) == [after.id]
    assert r.sismember(client.keys.limit_waiting("gated"), held.id) == 0
    _open(gates, "first"), _open(gates, "after"), _open(gates, "held")
    assert first.result(10) == "first" and after.result(10) == "after"
    assert unrecoverable(r, client.keys, [first.id, held.id, after.id]) == {}


def test_a_run_held_by_the_rate_limit_waits_scheduled_and_can_be_canceled(start, client, registry, r):
    @define_workflow("rated", registry=registry, rate_limit=RateLimit(limit=1, period=60))
    def rated(ctx):
        return "ran"

    start(concurrency=2)
    first = rated.run(client=client)
    assert first.result(10) == "ran"
    second = rated.run(client=client)
    wait_until(lambda: second.status() == "scheduled")
    run = client.get_run(second.id)
    assert run.available_at is not None and run.available_at > run.created_at + 50  # a minute after the first start
    assert r.hget(client.keys.run(second.id), RunField.HELD_BY) == "rate"
    assert client.cancel(second.id) is True and second.status() == "canceled"
    assert r.scard(client.keys.limit_waiting("rated")) == 0


def test_retry_of_a_failed_limited_run_obeys_the_limit(start, client, registry, r):
    gated, gates, running, peak = _gate_workflow(registry, concurrency=[Concurrency(limit=1)])
    start(concurrency=4)
    failing = gated.run({"gate": "f", "fail": True}, client=client)
    _open(gates, "f")
    wait_until(lambda: failing.status() == "failed")
    blocker = gated.run({"gate": "b"}, client=client)
    wait_until(lambda: running == [blocker.id])
    r.hset(client.keys.run(failing.id), RunField.INPUT_JSON, '{"gate":"f"}')  # it will succeed this time
    assert client.retry(failing.id) is True
    wait_until(lambda: r.sismember(client.keys.limit_waiting("gated"), failing.id))
    assert failing.status() == "queued" and running == [blocker.id]  # held: the blocker has the unit
    _open(gates, "b")
    assert failing.result(10) == "f" and blocker.result(10) == "b"
    assert peak[0] == 1


def test_a_retry_gives_the_unit_back_while_the_run_waits_for_its_next_attempt(start, client, registry, r):
    attempts: list[int] = []

    @define_workflow("flaky", registry=registry, max_attempts=3, concurrency=[Concurrency(limit=1)])
    def flaky(ctx):
        attempts.append(ctx.run.attempt)
        if ctx.input == "flaky" and ctx.run.attempt == 1:
            raise RuntimeError("first attempt fails")
        return ctx.input

    start(concurrency=2)
    first = flaky.run("flaky", client=client)
    wait_until(lambda: first.status() == "scheduled")
    other = flaky.run("other", client=client)
    assert other.result(10) == "other"  # ran while the flaky run waited for its retry
    assert first.result(10) == "flaky" and sorted(attempts) == [1, 1, 2]
    assert r.get(client.keys.workflow_running("flaky")) == "0"


def test_a_limit_counts_runs_of_the_asyncio_package_in_its_counter(start, client, registry, r):
    """The workflow-wide limit is the asyncio package's ``max_concurrency``: runs
    it counts in ``workflow-running:<name>`` hold ours back."""
    gated, gates, running, _ = _gate_workflow(registry, concurrency=[Concurrency(limit=2)])
    r.set(client.keys.workflow_running("gated"), 2)  # two runs an asyncio worker is executing
    _hold_the_sweep_lock(client)  # the worker's recount (of our running index) would let the run in early
    start(concurrency=4)
    handle = gated.run({"gate": "g"}, client=client)
    _open(gates, "g")
    wait_until(lambda: r.sismember(client.keys.limit_waiting("gated"), handle.id))
    assert handle.status() == "queued"
    r.decr(client.keys.workflow_running("gated"))  # the asyncio worker finished one...
    _sweep(client)  # ...and the sweeper's recount lets ours in
    assert handle.result(10) == "g"


# -- runs other clients enqueued; data that is not right ------------------------------------


def test_a_run_enqueued_without_its_limits_gets_them_from_the_worker(start, client, registry, redis_url, prefix, r):
    gated, gates, running, peak = _gate_workflow(registry, concurrency=[Concurrency(limit=2, key=lambda input: input["gate"])])
    client.sync_registry(registry)
    start(concurrency=6)
    with create_client(redis_url, prefix=prefix) as by_name:  # knows the workflow by name only
        handles = [by_name.run("gated", {"gate": "g"}) for _ in range(5)]
        bad = by_name.run("gated", {"no": "gate"})
    wait_until(lambda: len(running) == 2)
    wait_until(lambda: bad.status() == "failed")  # its key= fails it as a worker computes its limits
    error = client.get_run(bad.id).error
    assert error["kind"] == "validation" and "key= raised on the input" in error["message"]
    gevent.sleep(0.2)
    assert len(running) == 2 and r.scard(client.keys.limit_waiting("gated")) == 3
    assert all(r.hget(client.keys.run(h.id), RunField.LIMITS_JSON) for h in handles)
    _open(gates, "g")
    assert [h.result(10) for h in handles] == ["g"] * 5 and peak[0] == 2


@pytest.mark.parametrize(
    "raw",
    ["{", '{"w":"elsewhere:key","h":"x","i":"x","q":"x","s":"x","c":[]}', '"just a string"'],
)
def test_a_run_whose_limits_field_is_corrupt_fails_clearly_and_blocks_nothing(start, client, registry, r, raw):
    @define_workflow("plain", registry=registry)
    def plain(ctx):
        return "ok"

    client.sync_registry(registry)
    bad = plain.run(client=client)
    r.hset(client.keys.run(bad.id), RunField.LIMITS_JSON, raw)
    good = plain.run(client=client)
    start(concurrency=2)
    assert good.result(10) == "ok"
    wait_until(lambda: bad.status() == "failed")
    assert "limitsJson" in client.get_run(bad.id).error["message"]


def test_the_sweeper_frees_units_of_runs_that_are_no_longer_running(start, client, registry, r):
    """A unit lost on the way (a run ended by a worker that knows nothing of
    limits) is found by the sweeper's recount; the held runs then start."""
    gated, gates, running, _ = _gate_workflow(registry, concurrency=[Concurrency(limit=1, key=lambda input: input["gate"])])
    units = client.keys.limit_units("gated", 0, "g")
    r.sadd(units, "run_ended-by-a-foreign-worker")
    _hold_the_sweep_lock(client)  # the recount below is the test's own, after the run is seen held
    start(concurrency=2)
    handle = gated.run({"gate": "g"}, client=client)
    wait_until(lambda: r.sismember(client.keys.limit_waiting("gated"), handle.id))
    _open(gates, "g")
    _sweep(client)
    assert handle.result(10) == "g"
    assert r.smembers(units) == set() and r.hlen(client.keys.limits_held_index()) in (0, 1)


def test_a_run_with_a_limit_that_has_room_still_costs_one_round_trip_and_4_commands_more(start, client, registry, redis_url):
    """The price of a limit is paid by its runs alone (the hot path of others is
    tests/test_hot_path_budget.py's): the counter read and taken, given back,
    and a look at the held list, all in the same scripts."""

    @define_workflow("capped-noop", registry=registry, concurrency=[Concurrency(limit=1000)])
    def capped_noop(ctx):
        return None

    client.sync_registry(registry)
    trips, commands, by_command = drain_counts(lambda **o: start(registry, **o), client, redis_url, capped_noop, concurrency=4)
    assert trips <= 1.2, (trips, by_command)
    assert commands <= 16.3, (commands, by_command)
    assert by_command["incr"] == by_command["decr"] == 1.0, by_command
