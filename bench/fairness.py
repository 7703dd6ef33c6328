"""Fair queues: how soon a run on a quiet queue starts while another queue drains a backlog.

    .venv/bin/python bench/fairness.py [-n 100000] [--quiet-runs 1000] [-c 500]

One private redis-server; ``-n`` no-op runs wait on one queue, a ``-c``
worker (in this process, its observer counting starts) serves it and 49
quiet queues, and once every slot is busy, quiet runs are enqueued one at a
time, round robin, until ``--quiet-runs`` have started or the backlog is
down to a tenth. Prints the backlog's drain rate meanwhile, the backlog runs
started before each quiet run (p50 / p99 / max) and enqueue->start in ms
(see ``redflow.bench.fairness``; the issue's target: p99 <= 50 ms).
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

from redflow.bench.fairness import StartCounter, enqueue_backlog, fairness_registry, report_line, trickle  # noqa: E402
from redflow.bench.report import load_text, machine  # noqa: E402
from redflow.client import create_client  # noqa: E402
from redflow.engine.worker import start_worker  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("-n", type=int, default=100_000, help="runs in the backlog (default 100000)")
    parser.add_argument("--quiet-runs", type=int, default=1000, help="quiet runs at most (default 1000)")
    parser.add_argument("-c", type=int, default=500, help="worker slots (default 500)")
    args = parser.parse_args(argv)
    before = machine()
    registry = fairness_registry()
    with RedisServer() as server:
        client = create_client(server.url, prefix="fair", registry=registry)
        client.sync_registry(registry)
        enqueue_backlog(client, args.n)
        counter = StartCounter()
        worker = start_worker(registry, url=server.url, prefix="fair", concurrency=args.c, observers=[counter])
        try:
            deadline = time.monotonic() + 60
            while counter.backlog_starts < args.c and time.monotonic() < deadline:
                gevent.sleep(0.01)
            quiet = [wf for wf in registry.list() if wf.name != "fair-backlog"]
            result = trickle(client, counter, quiet, backlog=args.n, most=args.quiet_runs, pause_s=lambda: random.uniform(0, 0.002))
        finally:
            worker.stop()
            client.close()
    print(f"{before['date']}: {before['cpus']} CPU(s) {before['cpu']}, load average {load_text(before['load_average'])} before, "
          f"{load_text(machine()['load_average'])} after")  # fmt: skip
    print(report_line(result, backlog=f"{args.n:,} runs", slots=args.c, quiet_queues=len(quiet)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
