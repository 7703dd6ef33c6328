"""What an idle worker asks of Redis: commands per second, connections, and each loop's share.

A fleet shares one Redis, so a worker with nothing to do should cost it
little whatever its slot count and few commands per queue it serves. Two
counts, both taken from Redis (``INFO commandstats``, which counts the
commands Lua scripts call too, and ``INFO clients``), so that they say the
same on a fast machine and a slow one:

- :func:`count_idle`: every command Redis executed for the worker over a
  window, and the connections the worker holds at its end;
- :func:`loop_costs`: each background loop's step run on its own, in a
  worker that is not started: the commands of one idle pass and the pause
  the step asks for after it, hence its commands per second.

``bench/idle_cost.py`` prints both for 1, 5 and 50 queues;
``tests/test_idle_cost.py`` holds a worker to its budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import gevent

from redflow.bench.probe import Probe, server_delta
from redflow.engine.worker import REGISTRY_CHECK_S, Worker
from redflow.registry import Registry, define_workflow

#: How many passes of each loop's step are counted (after one that takes leader locks and reads tables).
PASSES = 3


def queue_name(index: int) -> str:
    return f"idle-q{index}"


def queue_registry(queues: int) -> Registry:
    """One no-op workflow on each of ``queues`` queues: a worker of this registry serves them all."""
    registry = Registry()
    for index in range(queues):
        define_workflow(f"idle-{index}", queue=queue_name(index), registry=registry)(_noop)
    return registry


def _noop(ctx: object) -> None:
    """Never runs: the worker stays idle."""


def connected_clients(probe: Probe) -> int:
    return int(probe.call("INFO", "clients")["connected_clients"])


@dataclass(frozen=True, slots=True)
class IdleCount:
    """What Redis did for an idle worker over ``seconds``."""

    seconds: float
    by_command: Counter[str]
    connections: int  # the worker's, at the end of the window

    @property
    def commands(self) -> int:
        return sum(self.by_command.values())

    @property
    def per_s(self) -> float:
        return self.commands / self.seconds


def count_idle(probe: Probe, seconds: float, baseline_clients: int) -> IdleCount:
    """Every command Redis executes over ``seconds`` but the probe's own; the
    connections over ``baseline_clients`` (those open before the worker started)."""
    before = probe.sample()
    gevent.sleep(seconds)
    after = probe.sample()
    return IdleCount(seconds, server_delta(before, after).commands, connected_clients(probe) - baseline_clients)


@dataclass(frozen=True, slots=True)
class LoopCost:
    """One background loop idle: commands per pass and the pause between passes."""

    name: str
    commands_per_pass: float
    pause_s: float
    by_command: Counter[str]

    @property
    def per_s(self) -> float:
        return self.commands_per_pass / self.pause_s if self.pause_s > 0 else float("inf")


def _measured(probe: Probe, name: str, step: Callable[[], float]) -> LoopCost:
    step()  # leader locks taken, tables read: the passes counted are the steady ones
    before, pause_s = probe.sample(), 0.0
    for _ in range(PASSES):
        pause_s += step()
    commands = server_delta(before, probe.sample()).commands
    return LoopCost(name, sum(commands.values()) / PASSES, pause_s / PASSES, Counter({k: v // PASSES for k, v in commands.items()}))


def loop_costs(probe: Probe, worker: Worker) -> list[LoopCost]:
    """Each background loop of ``worker`` (constructed, not started) on its own.

    The lease keeper ticks every ``cancel_poll_ms`` but sends nothing without
    runs in flight; the registry check (one SMISMEMBER every REGISTRY_CHECK_S)
    is counted from the code, its step being the worker's own."""
    steps: dict[str, Callable[[], float]] = {
        "promoter": worker.promoter.step,
        "reaper": worker.reaper.step,
        "orphan sweeper": worker.sweeper.step,
        "limits sweeper": worker.flow_sweeper.step,
        "scheduled events": worker.scheduled_events.step,
        "heartbeat": worker.heartbeat.step,
        "cron": worker.cron.step,
        "retention": worker.retention.step,
    }

    def keeper_tick() -> float:
        worker.keeper.tick()
        return worker.keeper.tick_ms / 1000.0

    costs = [_measured(probe, name, step) for name, step in steps.items()]
    costs.append(_measured(probe, "lease keeper", keeper_tick))
    costs.append(LoopCost("registry check", 1.0, REGISTRY_CHECK_S, Counter({"smismember": 1})))
    return costs
