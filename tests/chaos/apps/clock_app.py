"""Workflows for the clock-skew tests: each run reports when it really ran, in Redis's clock.

A worker under ``faketime`` reads a wrong wall clock, so the handlers read
the time from Redis (``TIME``), the one clock every worker shares.
"""

from __future__ import annotations

from redflow import Registry, define_workflow

registry = Registry()


def _redis_now_ms(ctx) -> int:
    seconds, micros = ctx.client.redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


@define_workflow("delayed", registry=registry)
def delayed(ctx):
    return {"ran_at": _redis_now_ms(ctx)}


@define_workflow("flaky-once", max_attempts=2, registry=registry)
def flaky_once(ctx):
    if ctx.run.attempt == 1:
        raise ValueError("first attempt fails on purpose")
    return {"ran_at": _redis_now_ms(ctx)}


@define_workflow("tick", cron=[{"expression": "*/2 * * * * *", "id": "every-2s"}], registry=registry)
def tick(ctx):
    return {"ran_at": _redis_now_ms(ctx)}
