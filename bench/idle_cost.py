"""An idle worker's Redis traffic and connections, with 1, 5 and 50 queues, and each loop's share.

    .venv/bin/python bench/idle_cost.py [-c 500] [--queues 1,5,50] [--window 5]

For each queue count, on one private redis-server (flushed between):
first each background loop's idle step is run on its own in a worker that
is not started (``redflow.bench.idle_cost.loop_costs``: commands per pass,
the pause it asks for, commands per second); then a real ``-c`` worker with
the default options serves the queues, and after it has settled (two
blocking timeouts) every command Redis executes over ``--window`` seconds is
counted (``INFO commandstats``, script calls included) with the connections
it holds. What the loops do not explain is the slots' polling. Counts, not
timings, except that an overloaded worker polls less than it would: the
worker's CPU share is printed to tell.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import gevent  # noqa: E402

from redflow.bench.idle_cost import connected_clients, count_idle, loop_costs, queue_registry  # noqa: E402
from redflow.bench.probe import Probe, process_sample  # noqa: E402
from redflow.bench.report import load_text, machine  # noqa: E402
from redflow.client import create_client  # noqa: E402
from redflow.engine.worker import Worker, WorkerOptions, start_worker  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402


def one(url: str, queues: int, concurrency: int, window_s: float) -> list[str]:
    """The report's lines for one queue count."""
    probe = Probe(url)
    probe.call("FLUSHALL")
    registry = queue_registry(queues)
    prefix = f"idle{queues}"
    client = create_client(url, prefix=prefix, registry=registry)
    client.sync_registry(registry)
    options = WorkerOptions(queues=tuple(registry.queues()), concurrency=concurrency)
    costs = loop_costs(probe, Worker(client=client, registry=registry, options=options))
    client.close()
    probe.call("FLUSHALL")
    baseline = connected_clients(probe)
    worker = start_worker(registry, url=url, prefix=prefix, concurrency=concurrency)
    try:
        gevent.sleep(2 * options.blmove_timeout_s + 1.0)
        cpu_before, began = process_sample(os.getpid()).cpu_s, time.monotonic()
        idle = count_idle(probe, window_s, baseline)
        cpu_percent = (process_sample(os.getpid()).cpu_s - cpu_before) * 100.0 / (time.monotonic() - began)
    finally:
        worker.stop()
        probe.close()
    loops_per_s = sum(cost.per_s for cost in costs)
    lines = [
        f"### {queues} queue(s), `-c {concurrency}`: **{idle.per_s:,.0f} commands/s**, **{idle.connections} connections**"
        f" (this process's CPU {cpu_percent:.0f} % of a core, the bench's own sampling included)",
        "",
        "| loop | commands a pass | pause s | commands/s | per queue/s | commands of a pass |",
        "|---|---|---|---|---|---|",
    ]
    for cost in costs:
        detail = ", ".join(f"{name} {calls}" for name, calls in cost.by_command.most_common())
        figures = f"{cost.commands_per_pass:,.1f} | {cost.pause_s:.2f} | {cost.per_s:,.1f} | {cost.per_s / queues:.2f}"
        lines.append(f"| {cost.name} | {figures} | {detail} |")
    slots = idle.per_s - loops_per_s
    lines.append(f"| **loops in all** | | | **{loops_per_s:,.1f}** | {loops_per_s / queues:.2f} | |")
    per_slot = f"per slot: {slots / concurrency:.1f}/s"
    lines.append(f"| slots (the rest of the window) | | | **{slots:,.0f}** | {slots / queues:,.0f} | {per_slot} |")
    top = ", ".join(f"{name} {calls / idle.seconds:,.0f}" for name, calls in idle.by_command.most_common(8))
    return [*lines, "", f"The window's commands/s by command: {top}", ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("-c", type=int, default=500, help="worker slots (default 500)")
    parser.add_argument("--queues", default="1,5,50", help="comma-separated queue counts (default 1,5,50)")
    parser.add_argument("--window", type=float, default=5.0, help="seconds counted per queue count (default 5)")
    args = parser.parse_args(argv)
    meta = machine()
    with RedisServer() as server:
        report = [one(server.url, int(q), args.c, args.window) for q in args.queues.split(",")]
    print(f"{meta['date']}: {meta['cpus']} CPU(s) {meta['cpu']}, load average {load_text(meta['load_average'])} before, "
          f"{load_text(machine()['load_average'])} after\n")  # fmt: skip
    print("\n".join(line for lines in report for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
