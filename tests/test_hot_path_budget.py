"""The hot path's budget, counted by Redis itself: a worker with a full queue
costs one round trip and 12 Redis commands per no-op run (the commands Lua
scripts call included), and a feature a workflow does not use adds nothing.

Counts, not timings: they do not depend on the machine's load. The worker's
background loops (promoter, reaper, ...) also talk to Redis during the drain;
they add a few commands in all, which the bounds below leave room for.
"""

from __future__ import annotations

import functools

import gevent
import pytest
from helpers import wait_until

from redflow import Debounce, Registry, RetryPolicy, Singleton, create_client, define_workflow
from redflow.bench.probe import Probe, server_delta
from redflow.core.keys import new_id
from redflow.core.models import ScheduleField
from redflow.engine.schedules import ScheduleTicker

RUNS = 400


def drain_counts(start, client, redis_url: str, workflow, *, concurrency: int, prepare=None) -> tuple[float, float, dict[str, float]]:
    """Round trips and commands per run while a worker drains RUNS queued runs (``prepare(handles)`` first)."""
    keys = client.keys
    staging = keys.queue_ready("default") + ":staging"
    handles = client.run_many(workflow, [None] * RUNS)
    if prepare is not None:
        prepare(handles)
    probe = Probe(redis_url)
    probe.call("RENAME", keys.queue_ready("default"), staging)  # the worker must find them all at once
    worker = start(concurrency=concurrency)
    wait_until(lambda: probe.call("LLEN", keys.queue_processing("default")) == 0 and probe.call("CLIENT", "LIST").count("cmd=blmove") >= 1)
    before = probe.sample()
    probe.call("RENAME", staging, keys.queue_ready("default"))
    wait_until(lambda: probe.call("ZCARD", keys.runs_status("succeeded")) == RUNS, timeout=30)
    after = probe.sample()
    worker.stop()
    probe.close()
    delta = server_delta(before, after)
    return delta.trips / RUNS, sum(delta.commands.values()) / RUNS, {name: calls / RUNS for name, calls in delta.commands.items()}


# A schema costs no command: the worker checks the input in Python at every attempt
# (and its JSON Schema is synced once, when the worker starts).
@pytest.mark.parametrize("schema", [None, {"type": "null"}], ids=["no schema", "a JSON Schema"])
def test_a_busy_worker_spends_one_round_trip_and_12_commands_per_no_op_run(start, client, redis_url, schema):
    registry = Registry()

    @define_workflow("noop", schema=schema, registry=registry)
    def noop(ctx):
        return None

    client.sync_registry(registry)
    trips, commands, by_command = drain_counts(lambda **o: start(registry, **o), client, redis_url, noop, concurrency=4)
    assert trips <= 1.2, (trips, by_command)
    assert commands <= 12.3, (commands, by_command)
    # one settle per run, which also claims and starts the next run
    assert 0.99 <= by_command["fcall"] <= 1.05 and by_command.get("blmove", 0) <= 0.05, by_command


def test_a_worker_of_fifty_queues_drains_one_queues_backlog_at_one_call_per_run(start, client, redis_url):
    """A slot's long streak on one queue ends only when the board knows another queue to hold
    runs: with the other 49 empty, every settle claims the next run (a probe of every queue
    each 16 runs cost more calls a run and halved the drain: docs/performance.md)."""
    registry = Registry()

    @define_workflow("noop", registry=registry)
    def noop(ctx):
        return None

    for index in range(49):
        define_workflow(f"other-{index}", queue=f"other-{index}", registry=registry)(lambda ctx: None)
    client.sync_registry(registry)
    # 4 slots: below POLLER_FROM_SLOTS (engine/board.py), so no poll of the quiet queues either
    trips, commands, by_command = drain_counts(lambda **o: start(registry, **o), client, redis_url, noop, concurrency=4)
    assert by_command["fcall"] <= 1.1, by_command


def test_a_retry_policy_and_deadlines_cost_a_run_nothing_until_they_act(start, client, redis_url):
    """A policy is decided in the worker's memory and deadlines are fields of the
    run (one HSET at enqueue, read by the start script, watched by the lease keeper
    without a command): a run that succeeds pays the same 12 commands."""
    registry = Registry()

    @define_workflow(
        "bounded-noop", registry=registry, retry=RetryPolicy(max_attempts=5, initial_delay=1.0), start_within=600.0, timeout=3600.0
    )
    def bounded_noop(ctx):
        return None

    client.sync_registry(registry)
    trips, commands, by_command = drain_counts(lambda **o: start(registry, **o), client, redis_url, bounded_noop, concurrency=4)
    assert trips <= 1.2, (trips, by_command)
    assert commands <= 12.3, (commands, by_command)


def test_a_waiting_client_costs_the_run_two_commands_and_nobody_waiting_costs_none(start, client, registry):
    @define_workflow("slow-noop", registry=registry)
    def slow_noop(ctx):
        gevent.sleep(0.2)

    start()
    waited = slow_noop.run(None, client=client)
    unwaited = slow_noop.run(None, client=client)
    assert waited.result(5) is None
    wait_until(lambda: unwaited.status() == "succeeded")
    r = client.redis
    assert r.llen(client.keys.run_done(waited.id)) == 1 and 0 < r.pttl(client.keys.run_done(waited.id)) <= 60_000
    assert r.exists(client.keys.run_done(unwaited.id)) == 0


def test_interop_costs_a_run_one_command_its_terminal_stream_entry_and_a_blob_threshold_none(start, redis_url, prefix):
    """compat="redflow-0.1" marks runs for the asyncio package's waiters: their
    settle adds the terminal stream entry (XADD, and PEXPIRE: it lives a minute);
    a blob threshold that no payload reaches, and reading references, cost nothing."""
    registry = Registry()

    @define_workflow("noop-compat", registry=registry)
    def noop(ctx):
        return None

    for options, most, xadds in (({"compat": "redflow-0.1"}, 14.3, 1), ({"blob_threshold": 1024}, 12.3, 0)):
        with create_client(redis_url, prefix=prefix, **options) as client:
            client.sync_registry(registry)
            worker = functools.partial(start, registry, **options)
            trips, commands, by_command = drain_counts(worker, client, redis_url, noop, concurrency=4)
            client.redis.delete(*client.redis.keys(f"{prefix}:*"))
        assert trips <= 1.2 and commands <= most, (options, commands, by_command)
        assert xadds - 0.01 <= by_command.get("xadd", 0) <= xadds + 0.05, (options, by_command)


def test_a_stream_item_costs_one_script_call_of_four_commands_and_a_streamed_run_one_more_at_its_end(start, client, redis_url):
    """ctx.stream: one FCALL per item (with its HMGET, XADD and HSET: 4 commands);
    the run's end adds the end entry (one XADD). A run that does not stream pays
    nothing (the no-op run above); measured: 33.05 commands for 5 items."""
    registry = Registry()
    items = 5

    @define_workflow("streamer", registry=registry)
    def streamer(ctx):
        for n in range(items):
            ctx.stream(n)

    client.sync_registry(registry)
    trips, commands, by_command = drain_counts(lambda **o: start(registry, **o), client, redis_url, streamer, concurrency=4)
    assert trips <= 1.2 + items, (trips, by_command)
    assert commands <= 12.3 + 4 * items + 1, (commands, by_command)
    assert 0.99 + items <= by_command["fcall"] <= 1.05 + items and 0.99 + items <= by_command["xadd"] <= 1.01 + items, by_command


def test_a_signal_waiting_for_its_run_costs_one_round_trip_and_about_ten_commands_when_taken(start, client, redis_url):
    """docs/guide/signals.md, "Costs": a wait that finds its signal takes it in one script (the take and
    the step's record); a run that waits for none pays nothing (the no-op run above)."""
    registry = Registry()

    @define_workflow("approve", registry=registry)
    def approve(ctx):
        return ctx.step.wait_for_signal("approve")

    def signal_each(handles):
        for handle in handles:
            assert client.signal(handle.id, "approve", {"ok": True})

    client.sync_registry(registry)
    drain = drain_counts(lambda **o: start(registry, **o), client, redis_url, approve, concurrency=4, prepare=signal_each)
    trips, commands, by_command = drain
    assert trips <= 2.2, (trips, by_command)
    assert 12 + 8 <= commands <= 12 + 11.5, (commands, by_command)
    assert 1.99 <= by_command["fcall"] <= 2.05, by_command  # the settle, and the take


def test_schedules_cost_the_leader_one_command_a_pass_and_a_tick_five_round_trips(client, registry, r, redis_url):
    """Schedules cost runs nothing (a tick's run is an idempotent, tagged client.run);
    the cron leader reads the head of the next index once a pass, and a due tick
    costs it five round trips and about 24 commands (docs/guide/schedules.md)."""
    define_workflow("tick", registry=registry)(lambda ctx: None)
    client.sync_registry(registry)
    ticker = ScheduleTicker(client.store, client.targets)
    ticker.step()  # the clock read
    probe = Probe(redis_url)
    before = probe.sample()
    ticker.step()
    idle = server_delta(before, probe.sample())
    assert dict(idle.commands) == {"zrange": 1} and idle.trips == 1
    client.schedules.create("yearly", workflow="tick", cron="0 0 1 1 *")
    tick_ms = client.now_ms() - 1000
    r.hset(client.keys.schedule("yearly"), mapping={ScheduleField.TICK_MS: tick_ms, ScheduleField.DUE_MS: tick_ms})
    r.zadd(client.keys.schedules_next(), {"yearly": tick_ms})
    before = probe.sample()
    ticker.step()
    tick = server_delta(before, probe.sample())
    probe.close()
    assert client.schedules.get("yearly").fired == 1
    assert tick.trips <= 5 and sum(tick.commands.values()) <= 25, (tick.trips, dict(tick.commands))


def test_a_singleton_costs_its_run_two_commands_at_its_end_and_a_workflow_without_one_nothing(start, client, redis_url):
    """docs/guide/policies.md, "Costs": the settle script reads the run's singletonKey with
    the fields it reads anyway (a run without one pays nothing: the no-op run above),
    and a singleton run lets go of its key (GET, DEL): 14 commands per no-op run."""
    registry = Registry()

    @define_workflow("unique-noop", registry=registry, singleton=Singleton(key=lambda _: new_id("key")))
    def unique_noop(ctx):
        return None

    client.sync_registry(registry)
    trips, commands, by_command = drain_counts(lambda **o: start(registry, **o), client, redis_url, unique_noop, concurrency=4)
    assert trips <= 1.2, (trips, by_command)
    assert commands <= 14.3, (commands, by_command)
    assert 0.99 <= by_command["get"] <= 1.05 and 0.99 <= by_command["del"] <= 1.05, by_command


@pytest.mark.parametrize(
    ("options", "inputs", "most"),
    [
        ({}, range(50), 6),
        ({"singleton": Singleton(key=lambda i: str(i))}, range(50), 9),
        ({"singleton": Singleton(key="one")}, [0] * 50, 5),
        ({"debounce": Debounce(period=60, key=lambda i: str(i))}, range(50), 10),
        ({"debounce": Debounce(period=60, key="one")}, [0] * 50, 7),
    ],
    ids=["plain", "singleton, new keys", "singleton, skipped", "debounce, new windows", "debounce, collapsed"],
)
def test_what_an_enqueue_costs_with_a_singleton_or_a_debounce(client, redis_url, registry, options, inputs, most):
    """Commands per client.run (docs/guide/policies.md, "Costs"): a plain run costs 6; a new
    key adds a GET, a SET and an HSET of the run's policy fields (9); a new window the same
    to a delayed run's 7 (10); a skipped call is the FCALL, a GET, an HGET and two HINCRBYs
    (5); a collapsed one the FCALL, a GET, an HMGET, an HSET, two HINCRBYs and a ZADD (7;
    a run with start_within or limits: one more HSET each)."""
    flow = define_workflow("enqueued", registry=registry, **options)(lambda ctx: None)
    flow.run(-1, client=client)  # the script loaded, the clock read
    probe = Probe(redis_url)
    before = probe.sample()
    for value in inputs:
        flow.run(value, client=client)
    delta = server_delta(before, probe.sample())
    probe.close()
    per_run = sum(delta.commands.values()) / len(inputs)
    assert most <= per_run <= most + 0.1, (per_run, dict(delta.commands))  # (a clock resync would add 0.02)


def five_step_workflow(registry, name, step_body):
    """A workflow of five first-time steps, each ``step_body(n)``; every record is checked after the drain."""

    @define_workflow(name, registry=registry)
    def five_steps(ctx):
        return [ctx.step.run(f"s{n}", lambda n=n: step_body(n)) for n in range(5)]

    return five_steps


def assert_every_step_recorded(client, handles, steps=5):
    for handle in handles[:20]:
        assert handle.result(5) == list(range(steps))
        recorded = client.redis.hgetall(client.keys.run_steps(handle.id, "default"))
        assert sorted(recorded) == [f"s{n}" for n in range(steps)], recorded


def test_steps_that_wait_on_nothing_ride_on_the_settle(start, client, redis_url):
    """Step records sent behind (engine/step_records.py): a run of five steps that wait on
    nothing (no I/O) sends their records with its settle, one HSET inside the one FCALL: a
    5-step run costs what a no-op run does plus that HSET."""
    registry = Registry()
    five_steps = five_step_workflow(registry, "five-steps", lambda n: n)
    client.sync_registry(registry)
    handles = []
    trips, commands, by_command = drain_counts(
        lambda **o: start(registry, **o), client, redis_url, five_steps, concurrency=4, prepare=handles.extend
    )
    assert trips <= 1.2, (trips, by_command)
    assert commands <= 13.3, (commands, by_command)
    assert 0.99 <= by_command["fcall"] <= 1.05 and by_command["hset"] <= 3.05, by_command
    assert_every_step_recorded(client, handles)


def test_a_first_time_step_that_waits_costs_one_round_trip_and_three_commands(start, client, redis_url):
    """A step that waited on something (I/O, a sleep) is recorded as it ends, waiting for the
    reply (which also reports a cancel pending): one FCALL whose script reads the run (HMGET:
    its fence and cancelRequestedAt) and writes the record (HSET), 3 commands, the lease key
    neither read nor extended while it is fresh (store/lua/save_step.lua)."""
    registry = Registry()
    five_steps = five_step_workflow(registry, "five-waiting-steps", lambda n: gevent.sleep(0.001) or n)
    client.sync_registry(registry)
    handles = []
    trips, commands, by_command = drain_counts(
        lambda **o: start(registry, **o), client, redis_url, five_steps, concurrency=4, prepare=handles.extend
    )
    assert trips <= 1.2 + 5, (trips, by_command)
    assert commands <= 12.3 + 3 * 5, (commands, by_command)
    assert 0.99 + 5 <= by_command["fcall"] <= 1.05 + 5, by_command
    assert by_command.get("get", 0) <= 0.05 and by_command.get("pexpire", 0) <= 0.05, by_command
    assert_every_step_recorded(client, handles)


def test_a_waiter_woken_by_the_end_of_its_run_reads_it_in_the_same_round_trip(start, client, registry):
    """``wait_for`` sends each BLMOVE on the done token with the re-read, in one pipeline:
    a waiter's round trips are its first read and one per wait (a wait whose slice ran out
    included), with no read of its own after the wake-up."""

    @define_workflow("tenth-of-a-second", registry=registry)
    def tenth(ctx):
        gevent.sleep(0.1)
        return "done"

    start()
    handle = tenth.run(None, client=client)
    redis = client.redis
    checkouts, waits = [], []
    get_connection, pipeline = redis.connection_pool.get_connection, redis.pipeline

    def counted_checkout(*args, **kwargs):
        checkouts.append(args)
        return get_connection(*args, **kwargs)

    def counted_pipeline(*args, **kwargs):
        waits.append(args)
        return pipeline(*args, **kwargs)

    redis.connection_pool.get_connection, redis.pipeline = counted_checkout, counted_pipeline
    try:
        assert handle.result(5) == "done"
    finally:
        redis.connection_pool.get_connection, redis.pipeline = get_connection, pipeline
    assert waits and len(checkouts) == 1 + len(waits), (len(checkouts), len(waits))
