"""Fair queues: how soon a run on a quiet queue starts while another queue drains a backlog.

    .venv/bin/python bench/fairness.py [-n 100000] [--quiet-runs 1000] [-c 500] [--worker subprocess|in-process]

One private redis-server; ``-n`` no-op runs wait on one queue, a ``-c``
worker serves it and 49 quiet queues, and once every slot is busy, quiet
runs are enqueued one at a time, round robin, until ``--quiet-runs`` have
started or the backlog is down to a tenth. Prints the backlog's drain rate
meanwhile, the backlog runs started before each quiet run (p50 / p99 / max)
and enqueue->start in ms (see ``redflow.bench.fairness``; the issue's
target: p99 <= 50 ms while the backlog drains at full speed).

``--worker subprocess`` (the default) runs the real ``redflow-gevent worker``
command, as ``redflow-gevent bench --worker subprocess`` does, so that the
backlog drains at the worker's full speed: compare the drain rate with that
bench's. Starts are read from Redis: a quiet run's ``startedAt`` (whole ms)
against the producer's clock, the backlog runs started before it from their
``startedAt``. ``--worker in-process`` runs the worker in this process with an
observer counting starts (exact counts, sub-ms times, as the test does), but
it shares the trickle's GIL and drains at a fraction of full speed.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import gevent  # noqa: E402

from redflow.bench.fairness import (  # noqa: E402
    APP,
    BACKLOG_QUEUE,
    Fairness,
    HashStarts,
    StartCounter,
    StartSource,
    enqueue_backlog,
    registry,
    report_line,
    trickle,
)
from redflow.bench.probe import Probe  # noqa: E402
from redflow.bench.report import load_text, machine  # noqa: E402
from redflow.bench.worker import SubprocessWorker  # noqa: E402
from redflow.client import RedflowClient, create_client  # noqa: E402
from redflow.engine.worker import start_worker  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

PREFIX = "fair"
BUSY_TIMEOUT_S = 60.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("-n", type=int, default=100_000, help="runs in the backlog (default 100000)")
    parser.add_argument("--quiet-runs", type=int, default=1000, help="quiet runs at most (default 1000)")
    parser.add_argument("-c", type=int, default=500, help="worker slots (default 500)")
    parser.add_argument("--worker", choices=["subprocess", "in-process"], default="subprocess",
                        help="subprocess (default): the real worker command; in-process: an observer counts starts")  # fmt: skip
    args = parser.parse_args(argv)
    before = machine()
    with RedisServer() as server:
        client = create_client(server.url, prefix=PREFIX, registry=registry)
        try:
            client.sync_registry(registry)
            backlog_ids = enqueue_backlog(client, args.n)
            measure = _subprocess if args.worker == "subprocess" else _in_process
            result = measure(client, server.url, backlog_ids, args)
        finally:
            client.close()
    print(f"{before['date']}: {before['cpus']} CPU(s) {before['cpu']}, load average {load_text(before['load_average'])} before, "
          f"{load_text(machine()['load_average'])} after")  # fmt: skip
    quiet_queues = len(registry.list()) - 1
    print(report_line(result, worker=args.worker, backlog=f"{args.n:,} runs", slots=args.c, quiet_queues=quiet_queues))
    # Little's law: a busy slot's command waits behind the other slots' (the quiet run's take too)
    print(f"a busy slot's run (slots / drain rate): {args.c * 1000.0 / result.backlog_per_s:.1f} ms")
    return 0


def _in_process(client: RedflowClient, url: str, backlog_ids: list[str], args: argparse.Namespace) -> Fairness:
    counter = StartCounter()
    worker = start_worker(registry, url=url, prefix=PREFIX, concurrency=args.c, observers=[counter])
    try:
        return _busy_then_trickle(client, counter, len(backlog_ids), args)
    finally:
        worker.stop()


def _subprocess(client: RedflowClient, url: str, backlog_ids: list[str], args: argparse.Namespace) -> Fairness:
    probe = Probe(url)
    worker = SubprocessWorker(url, PREFIX, args.c, probe, app=APP)
    try:
        worker.start()
        return _busy_then_trickle(client, HashStarts(worker, client.keys.queue_ready(BACKLOG_QUEUE), backlog_ids), len(backlog_ids), args)
    finally:
        worker.stop()
        probe.close()


def _busy_then_trickle(client: RedflowClient, source: StartSource, backlog: int, args: argparse.Namespace) -> Fairness:
    """Once every slot has started a backlog run, the trickle."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while source.backlog_started() < args.c and time.monotonic() < deadline:
        gevent.sleep(0.01)
    quiet = [wf for wf in registry.list() if wf.name != "fair-backlog"]
    return trickle(client, source, quiet, backlog=backlog, most=args.quiet_runs, pause_s=lambda: random.uniform(0, 0.002))


if __name__ == "__main__":
    sys.exit(main())
