"""The side channel: how a chaos test counts executions without trusting the engine.

Handlers and step functions count themselves in a *separate* redis-server
(``REDFLOW_CHAOS_SIDE_URL``), which the tests never kill, restart or drop
connections of. So a count read back there is independent of the engine's
own bookkeeping, and of the faults injected into the engine's Redis.

Keys (all under the worker's prefix, so tests do not see each other's):
``<prefix>:side:handler`` hash run id -> handler executions, and
``<prefix>:side:step:<name>`` hash run id -> executions of that step function.
"""

from __future__ import annotations

import os
import uuid

import redis

SIDE_URL_ENV = "REDFLOW_CHAOS_SIDE_URL"

_side: redis.Redis | None = None


def handler_key(prefix: str) -> str:
    return f"{prefix}:side:handler"


def step_key(prefix: str, step: str) -> str:
    return f"{prefix}:side:step:{step}"


def die_after_register_key(prefix: str) -> str:
    """Set of run ids whose worker SIGKILLs itself right after writing the run's
    event waiter entry, before the park's settle (tests/chaos/apps/dying_waits_app.py)."""
    return f"{prefix}:side:die-after-register"


def side() -> redis.Redis:
    global _side
    if _side is None:
        _side = redis.Redis.from_url(os.environ[SIDE_URL_ENV], decode_responses=True, max_connections=2000)
    return _side


def count_handler(ctx) -> int:
    """Count one execution of the handler body; returns how many there have been for this run."""
    return side().hincrby(handler_key(ctx.client.prefix), ctx.run.id, 1)


def count_step(ctx, step: str) -> int:
    """Count one execution of a step function; returns how many there have been for this run."""
    return side().hincrby(step_key(ctx.client.prefix, step), ctx.run.id, 1)


def step_token(ctx, step: str) -> str:
    """Count one execution and return a token naming it (``<step>:<n>:<random>``).

    The token is the step's output, so a test can tell which execution's
    output the engine recorded and whether the run's result was built from it."""
    return f"{step}:{count_step(ctx, step)}:{uuid.uuid4().hex[:8]}"
