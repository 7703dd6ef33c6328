"""The asyncio ``redflow`` 0.1.9 side of tests/test_interop_redflow019.py.

Runs under ``.venv-redflow019/bin/python -I`` (the virtualenv scripts/setup-env
--test makes, where ``redflow`` is the PyPI package, not this repository's):
one sub-command per call, each printing JSON lines on stdout.

    run WORKFLOW INPUT [--wait-ms N]   enqueue by name ({"id"}); with --wait-ms, then its result
    wait RUN_ID --wait-ms N            a handle's result: {"output"} or {"error", "message"}
    worker [--concurrency N]           a 0.1.9 worker of the workflows below ({"ready": true}) until SIGTERM
    steps RUN_ID / state RUN_ID        what its client reads of a run
    blob-store RUN_ID JSON             its large-payload writer: the stored value ({"stored"})
    blob-resolve RUN_ID STORED         its reader: the JSON text ({"json"})
    step-records                       the step records its encoders write ({"records"})
    scopes PAIRS                       its queue names of JSON [[app, queue], ...] ({"queues"})

Common options: --url, --prefix, --app (a 0.1.x worker needs an app name;
"unknown" is the one that leaves queue names unscoped).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from redis.asyncio import Redis

from redflow import NonRetriableError, StartWorkerOptions, WorkflowRegistry, create_client, define_workflow, start_worker
from redflow._storage import payloads, steps
from redflow._storage.redis_values import scope_queue_name

REGISTRY = WorkflowRegistry()
_side: dict[str, Redis] = {}


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def echo(ctx: Any) -> Any:
    return {"echo": ctx.input, "by": "redflow 0.1.9"}


async def fail(ctx: Any) -> Any:
    raise NonRetriableError("refused: " + "x" * ctx.input["size"])


async def with_steps(ctx: Any) -> Any:
    """Step "a" (its output is ``size`` bytes, counted in the hash ``calls``), then
    hang if told to (the test kills this worker), else finish."""

    async def a() -> Any:
        await _side["redis"].hincrby(ctx.input["calls"], "a", 1)
        return {"a": "z" * ctx.input["size"]}

    out = await ctx.step.run("a", a)
    if ctx.input.get("hang") == "redflow 0.1.9":
        await asyncio.sleep(3600)
    return {"a_len": len(out["a"]), "by": "redflow 0.1.9"}


define_workflow("interop-echo", handler=echo, registry=REGISTRY)
define_workflow("interop-fail", handler=fail, max_attempts=1, registry=REGISTRY)
define_workflow("interop-steps", handler=with_steps, registry=REGISTRY)


async def result(client: Any, run_id: str, wait_ms: int) -> None:
    try:
        emit(output=await client.make_run_handle(run_id).result(timeout_ms=wait_ms))
    except Exception as exc:  # the test asserts on what the handle raised
        emit(error=type(exc).__name__, message=str(exc))


async def worker(args: argparse.Namespace) -> None:
    _side["redis"] = Redis.from_url(args.url)
    options = StartWorkerOptions(
        app=args.app or "unknown", url=args.url, prefix=args.prefix, registry=REGISTRY, concurrency=args.concurrency, lease_ms=1000
    )
    handle = await start_worker(options)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    emit(ready=True)
    await stop.wait()
    await handle.stop()


async def main(args: argparse.Namespace) -> None:
    if args.command == "worker":
        await worker(args)
        return
    client = create_client(url=args.url, prefix=args.prefix, app=args.app)
    redis, prefix = client.redis, client.prefix
    if args.command == "run":
        handle = await client.run_by_name(args.workflow, json.loads(args.input))
        emit(id=handle.id)
        if args.wait_ms:
            await result(client, handle.id, args.wait_ms)
    elif args.command == "wait":
        await result(client, args.run_id, args.wait_ms)
    elif args.command == "steps":
        emit(steps=await client.get_run_steps(args.run_id))
    elif args.command == "state":
        emit(state=await client.get_run(args.run_id))
    elif args.command == "blob-store":
        emit(stored=await payloads.store_json_string_for_run(redis=redis, prefix=prefix, run_id=args.run_id, json_string=args.json))
    elif args.command == "blob-resolve":
        emit(json=await payloads.resolve_json_string_for_run(redis=redis, prefix=prefix, run_id=args.run_id, stored_value=args.stored))
    elif args.command == "step-records":
        emit(records=step_records())
    elif args.command == "scopes":
        emit(queues=[scope_queue_name(app, queue) for app, queue in json.loads(args.pairs)])
    await client.close()


def step_records() -> dict[str, str]:
    wait = {"kind": "event", "event": "paid", "correlationKey": "o-1"}
    error = '{"name":"Error","message":"boom","kind":"error"}'
    return {
        "running": steps.encode_running_step_record(seq=1, attempt=1, started_at=1_700_000_000_000),
        "sleeping": steps.encode_running_step_record(seq=2, attempt=1, started_at=1_700_000_000_000, wait_until_at=1_700_000_060_000),
        "waiting": steps.encode_running_step_record(seq=3, attempt=2, started_at=1_700_000_000_000, wait_json=wait),
        "succeeded": steps.encode_succeeded_step_record(seq=4, attempt=2, output_json='{"a":1}', child_run_id="run_child"),
        "failed": steps.encode_failed_step_record(seq=5, attempt=2, error_json=error),
        "canceled": steps.encode_canceled_step_record(seq=6, attempt=3, error_json=error),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="redflow019_driver")
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--app", default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("workflow")
    run.add_argument("input")
    run.add_argument("--wait-ms", type=int, default=0)
    wait = sub.add_parser("wait")
    wait.add_argument("run_id")
    wait.add_argument("--wait-ms", type=int, required=True)
    work = sub.add_parser("worker")
    work.add_argument("--concurrency", type=int, default=4)
    for name in ("steps", "state"):
        sub.add_parser(name).add_argument("run_id")
    store = sub.add_parser("blob-store")
    store.add_argument("run_id")
    store.add_argument("json")
    resolve = sub.add_parser("blob-resolve")
    resolve.add_argument("run_id")
    resolve.add_argument("stored")
    sub.add_parser("step-records")
    sub.add_parser("scopes").add_argument("pairs")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
