"""An idle worker's cost to the Redis a fleet shares (issue 34): independent of
its slots, and a small constant per queue it serves.

Counts, not timings: Redis counts the commands (``INFO commandstats``, the
commands scripts call included) over a window of whole blocking timeouts,
and the connections (``INFO clients``). A slower machine can only send fewer
commands in the window, so the bounds hold on any machine. The loops' budget
is counted without a clock at all: each loop's idle pass run on its own, and
the pause it asks for after it.
"""

from __future__ import annotations

import gevent
from helpers import wait_until

from redflow.bench.idle_cost import connected_clients, count_idle, loop_costs, queue_registry
from redflow.bench.probe import Probe
from redflow.engine.worker import Worker, WorkerOptions

QUEUES = 50
SLOTS = 500
BLOCK_S = 1.0  # the default blocking timeout
PERIODS = 3
MAX_COMMANDS_PER_S = 100
MAX_CONNECTIONS = 60
#: The background loops' share of MAX_COMMANDS_PER_S (the claim of 50 queues needs the rest).
MAX_LOOP_COMMANDS_PER_S = 50


def test_an_idle_worker_of_500_slots_on_50_queues_sends_at_most_100_commands_a_second_over_60_connections(start, client, redis_url):
    registry = queue_registry(QUEUES)
    client.sync_registry(registry)
    probe = Probe(redis_url)
    baseline = connected_clients(probe)
    # the defaults of start_worker, not the test suite's faster ones
    worker = start(registry, concurrency=SLOTS, blmove_timeout=BLOCK_S, lease_ms=5000, reaper_interval_ms=500)
    wait_until(lambda: worker.heartbeat.beats >= 1)
    gevent.sleep(BLOCK_S)  # every claim once through its timeout
    idle = count_idle(probe, PERIODS * BLOCK_S, baseline)
    probe.close()
    assert idle.commands <= MAX_COMMANDS_PER_S * PERIODS * BLOCK_S, idle.by_command.most_common(10)
    assert idle.connections <= MAX_CONNECTIONS


def test_the_background_loops_of_an_idle_worker_on_50_queues_send_at_most_50_commands_a_second(client, redis_url):
    registry = queue_registry(QUEUES)
    client.sync_registry(registry)
    probe = Probe(redis_url)
    worker = Worker(client=client, registry=registry, options=WorkerOptions(queues=tuple(registry.queues()), concurrency=SLOTS))
    costs = loop_costs(probe, worker)
    probe.close()
    worker.retention.stop()
    worker.cron.resign()
    assert sum(cost.per_s for cost in costs) <= MAX_LOOP_COMMANDS_PER_S, [(c.name, round(c.per_s, 1)) for c in costs]
