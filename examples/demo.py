"""The quick-start demo: a real worker, the example workflows, a sample load.

Run by `scripts/demo`. Uses $REDIS_URL when set; otherwise starts a private
redis-server on a free loopback port and removes it afterwards. On $REDIS_URL
it writes under a prefix of its own, `redflow-demo:<8 hex digits>`, and deletes
every key of it when it ends (done, failed, Ctrl-C or SIGTERM): nothing serves
that prefix afterwards, so retention would never delete its ~18,000 keys.
`--keep` keeps them, to look at with `redflow-gevent --prefix <it> runs list`
or the dashboard; the demo prints how to delete them then.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

from redflow import CanceledError, RunFailedError, create_client, get_default_registry  # noqa: E402
from redflow.ops.control.prefix import delete_prefix  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import examples.workflows  # noqa: E402,F401 - registers the workflows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", "--runs", type=int, default=2000, help="send-welcome runs to push (default 2000)")
    parser.add_argument("-c", "--concurrency", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the demo's keys on $REDIS_URL (default: delete them at the end)")
    args = parser.parse_args()
    # SIGTERM ends the demo as Ctrl-C does: through the finally below, which stops the worker and cleans up.
    gevent.signal_handler(signal.SIGTERM, gevent.getcurrent().throw, SystemExit(143))

    server = None
    url = os.environ.get("REDIS_URL")
    if not url:
        server = RedisServer().start()
        url = server.url
        print(f"started a private redis-server at {url}")
    prefix = f"redflow-demo:{uuid.uuid4().hex[:8]}"
    client = create_client(url, prefix=prefix, registry=get_default_registry())
    env = dict(os.environ, REDIS_URL=url, PYTHONPATH=str(ROOT))
    cli = Path(sys.executable).with_name("redflow-gevent")
    cmd = [str(cli), "--log-level", "warning", "worker", "-A", "examples.workflows", "-c", str(args.concurrency), "--prefix", prefix]
    print("starting:", " ".join(cmd[1:]))
    worker = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        run_load(client, args.runs)
    finally:
        worker.terminate()
        code = worker.wait(timeout=60)
        print(f"worker stopped gracefully (exit {code})")
        if server is None:
            leave(client, url, args.keep)
        client.close()
        if server is not None:
            server.cleanup()
    return 0


def leave(client, url: str, keep: bool) -> None:
    """Delete the demo's keys from $REDIS_URL, or say where they are and how to delete them."""
    if not keep:
        print(f"deleted the demo's {delete_prefix(client.redis, client.prefix):,} keys (prefix {client.prefix}) from $REDIS_URL")
        return
    print(f"kept the demo's keys (prefix {client.prefix}); look at them with")
    print(f"  redflow-gevent --prefix {client.prefix} runs list    (or: dashboard)")
    print("and delete them with")
    print(f'  redis-cli -u "$REDIS_URL" --scan --pattern \'{client.prefix}:*\' | xargs -r redis-cli -u "$REDIS_URL" unlink')


def run_load(client, runs: int) -> None:
    print(f"\n1. {runs} send-welcome runs (3 steps each: a step, a child workflow, an event)")
    began = time.monotonic()
    handles = client.run_many("send-welcome", ({"id": i, "name": f"user{i}"} for i in range(runs)))
    results = [h.result(timeout=120) for h in handles]
    elapsed = time.monotonic() - began
    print(f"   {len(results)} succeeded in {elapsed:.2f}s ({runs / elapsed:.0f} workflows/s, each with a child run)")
    print(f"   first result: {results[0]}")
    steps = client.get_steps(handles[0].id)
    print("   its steps: " + ", ".join(f"{s.seq}:{s.name}={s.status}" for s in steps))

    print("\n2. idempotency: the same key twice is one run")
    a = client.run("send-welcome", {"id": 10_001}, idempotency_key="welcome-10001")
    b = client.run("send-welcome", {"id": 10_001}, idempotency_key="welcome-10001")
    print(f"   {a.id} == {b.id}: {a.id == b.id}; result {a.result(30)}")

    print("\n3. retries with backoff, and a non-retryable failure with on_failure")
    charges = [client.run("charge-card", {"amount": 100 + i}) for i in range(5)]
    for h in charges:
        h.result(60)
        run = client.get_run(h.id)
        print(f"   {h.id}: succeeded after {run.attempt} attempt(s)")
    declined = client.run("charge-card", {"amount": 1, "declined": True})
    try:
        declined.result(30)
    except RunFailedError as exc:
        print(f"   declined: {exc}")

    print("\n4. bad input is refused before anything is enqueued")
    try:
        client.run("send-welcome", {"id": "not-an-int"})
    except Exception as exc:  # InputValidationError
        print(f"   {type(exc).__name__}: {exc}")

    print("\n5. cancel a long run while it runs")
    export = client.run("slow-export", {})
    while export.status() != "running":
        gevent.sleep(0.05)
    gevent.sleep(0.5)
    client.cancel(export.id, reason="demo cancel")
    try:
        export.result(30)
    except CanceledError as exc:
        done = [s for s in client.get_steps(export.id) if s.status == "succeeded"]
        print(f"   {exc} after {len(done)} of 50 steps")

    print("\n6. cron: heartbeat fires every 2 seconds")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(client.list_runs(workflow="heartbeat", status="succeeded")) < 2:
        gevent.sleep(0.2)
    beats = client.list_runs(workflow="heartbeat", status="succeeded")
    print(f"   {len(beats)} heartbeat runs, input {beats[0].output if beats else None}")

    counted = len(client.list_runs(workflow="count-sent", limit=100_000))
    print(f"\nevents: {counted} count-sent runs started by email.sent")
    totals = {s: len(client.list_runs(status=s, limit=1_000_000)) for s in ("succeeded", "failed", "canceled")}
    print(f"totals by status: {totals}")


if __name__ == "__main__":
    sys.exit(main())
