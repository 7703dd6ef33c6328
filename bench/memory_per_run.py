"""Bytes Redis keeps per finished run, and what retention gives back.

    .venv/bin/python bench/memory_per_run.py [-n 10000] [--json out.json]

Each case gets a fresh private redis-server and a worker; ``n`` runs are
drained, the finished runs' leases left to expire, and ``used_memory``
(INFO memory: what the allocator holds, not RSS) is read before and after
``client.purge`` deletes them all: the difference over ``n`` is what one
finished run keeps (its hash, its steps, its entries in runs:created,
runs:status:<status> and workflow-runs:<name>). Both readings are taken
with the worker idle, so connection buffers weigh the same in each. The
last case has a one-second retention: what is left once the cleaner has
deleted the runs, against the memory before they were enqueued.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
import orjson  # noqa: E402
import redis  # noqa: E402
from gevent.pool import Pool  # noqa: E402

from redflow import Registry, Retention, create_client, define_workflow, start_worker  # noqa: E402
from redflow.core.retention import DEFAULT_RETENTION  # noqa: E402
from redflow.engine.retention import RetentionCleaner  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

LEASE_MS = 500


def used(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def settle(predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        gevent.sleep(0.05)


def case(n: int, *, input_value: Any = None, steps: int = 0, fail: bool = False, waited: bool = False,
         retention: Any = None, redis_args: tuple[str, ...] = ()) -> dict[str, float]:  # fmt: skip
    """Drain ``n`` runs of one workflow on a fresh Redis; bytes per run kept."""
    registry = Registry()

    @define_workflow("measured", registry=registry, max_attempts=1, retention=retention)
    def measured(ctx: Any) -> Any:
        for i in range(steps):
            ctx.step.run(f"step-{i}", lambda: {"i": 1})
        if fail:
            raise RuntimeError("measured failure")
        return None

    with RedisServer(extra_args=list(redis_args)) as server:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        client = create_client(server.url, prefix="mem", registry=registry)
        worker = start_worker(registry, url=server.url, prefix="mem", concurrency=50, lease_ms=LEASE_MS, cron=False,
                              retention_interval_s=0.2, clean_retention=retention is not None)  # fmt: skip
        gevent.sleep(2.0)  # Redis trims the new connections' buffers
        before = used(r)
        if waited:
            handles = [measured.run(input_value, client=client) for _ in range(n)]
            Pool(200).map(_outcome, handles)
        else:
            client.run_many(measured, [input_value] * n)
        created = client.keys.runs_created()
        if retention is not None:
            settle(lambda: r.zcard(created) == 0 and client.count_runs("queued") == 0)
            gevent.sleep(LEASE_MS / 1000 + 2.0)
            out = {"bytes_per_run_after_retention": round((used(r) - before) / n, 1), "keys_left": r.dbsize()}
        else:
            settle(lambda: client.count_runs("failed" if fail else "succeeded") == n)
            gevent.sleep(LEASE_MS / 1000 + 2.0)  # the finished runs' leases expire, buffers are trimmed
            kept = used(r)
            assert client.purge(older_than=0) == n
            gevent.sleep(2.0)
            out = {"bytes_per_run": round((kept - used(r)) / n, 1)}
        worker.stop()
        client.close()
        r.close()
        return out


def cleanup_rate(n: int) -> dict[str, float]:
    """How fast one cleaner deletes a backlog of ``n`` due runs (two steps
    each), with Redis's commands per deleted run (INFO commandstats)."""
    registry = Registry()

    @define_workflow("due", registry=registry, retention=1)
    def due(ctx: Any) -> Any:
        return ctx.step.run("a", lambda: 1) + ctx.step.run("b", lambda: 2)

    with RedisServer() as server:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        client = create_client(server.url, prefix="mem", registry=registry)
        worker = start_worker(registry, url=server.url, prefix="mem", concurrency=50, cron=False, clean_retention=False)
        client.run_many(due, [None] * n)
        settle(lambda: client.count_runs("succeeded") == n)
        worker.stop()
        gevent.sleep(1.2)
        cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
        calls_before = _calls(r)
        began = time.perf_counter()
        passes = 0
        while r.zcard(client.keys.runs_created()):
            cleaner.step()
            passes += 1
        elapsed = time.perf_counter() - began
        commands = (_calls(r) - calls_before) / n
        cleaner.stop()
        client.close()
        r.close()
        return {"runs_per_s": round(n / elapsed), "passes": passes, "redis_commands_per_run": round(commands, 2)}


def _calls(r: redis.Redis) -> int:
    return sum(int(v["calls"]) for v in r.info("commandstats").values())


def _outcome(handle: Any) -> None:
    try:
        handle.result(60)
    except Exception:  # a failed run raises: only the wait matters here
        return


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("redflow").setLevel(logging.ERROR)  # the failed case logs each failure
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=10_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    n = args.n
    long_input = {"text": "x" * 100}
    cases: dict[str, Callable[[], dict[str, float]]] = {
        "no-op, input null": lambda: case(n),
        "no-op, input of 100 bytes": lambda: case(n, input_value=long_input),
        "no-op, input of 100 bytes, hash-max-listpack-value 1024": lambda: case(
            n, input_value=long_input, redis_args=("--hash-max-listpack-value", "1024")
        ),
        "two steps": lambda: case(n, steps=2),
        "failed (error with its stack)": lambda: case(n, fail=True),
        "failed, hash-max-listpack-value 8192": lambda: case(n, fail=True, redis_args=("--hash-max-listpack-value", "8192")),
        "waited for (result()), wake-up list not expired yet": lambda: case(n, waited=True),
        "no-op, retention 1 s": lambda: case(n, retention=Retention(succeeded=1, failed=1, canceled=1)),
        "cleaner deleting a backlog of two-step runs": lambda: cleanup_rate(max(n, 20_000)),
    }
    results = {}
    for name, run in cases.items():
        results[name] = run()
        print(f"{name:<60} {results[name]}", flush=True)
    if args.json:
        with open(args.json, "wb") as out:
            out.write(orjson.dumps({"n": n, "cases": results}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
