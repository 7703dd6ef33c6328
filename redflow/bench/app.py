"""Workflows the benchmarks run (``redflow-gevent bench`` and ``bench/``).

A worker subprocess runs them with
``redflow-gevent worker -A redflow.bench.app:registry``. They do as little
as a workflow can, so that what a benchmark measures is the engine: the
no-op run is claim, start and finalize and nothing else, and each step of
``bench-steps`` is one durable step whose function returns at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redflow.core import codec
from redflow.core.models import step_succeeded_json
from redflow.registry import Registry, define_workflow

registry = Registry()

#: The one queue of the bench workflows, so a bench worker serves only them.
QUEUE = "bench"
NOOP = "bench-noop"
STEPS = "bench-steps"


def _constant(value: int) -> Callable[[], int]:
    # A closure without default arguments: the step runner's fast path for
    # "does this function take the cancel signal" (defaults send it to inspect).
    return lambda: value


@define_workflow(NOOP, queue=QUEUE, max_attempts=1, registry=registry)
def noop(ctx: Any) -> None:
    """Nothing: claim, start and finalize are all the run costs."""
    return None


@define_workflow(STEPS, queue=QUEUE, max_attempts=1, registry=registry)
def steps(ctx: Any) -> int:
    """``input["steps"]`` durable steps, each returning its index."""
    total = 0
    for index in range(int(ctx.input["steps"])):
        total += ctx.step.run(step_name(index), _constant(index))
    return total


def step_name(index: int) -> str:
    return f"s{index}"


def workflow_for(step_count: int) -> str:
    return STEPS if step_count > 0 else NOOP


def run_input(step_count: int) -> Any:
    return {"steps": step_count} if step_count > 0 else None


def stored_steps(step_count: int, at_ms: int) -> dict[str, str]:
    """The steps hash of a run whose ``bench-steps`` steps all succeeded
    already (in the data-model format), so that a new attempt replays them."""
    return {step_name(index): step_succeeded_json(index + 1, at_ms, at_ms, codec.dumps(index)) for index in range(step_count)}
