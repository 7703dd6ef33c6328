"""Where enqueue->result's tail comes from in the paced phase: each waiter's calls, timed.

    .venv/bin/python bench/result_tail.py [--rate 200] [--runs 2000] [-c 500]

``redflow-gevent bench``'s paced phase (a waiter blocked in
``handle.result()`` per run, an in-process ``-c`` worker with its hot-path
timestamps) with the waiters' side recorded too: the client's
``read_state``, each wait (``reads._wait_then_read``: the BLMOVE and the
re-read, one pipeline) and the connections its pool opens are wrapped in
the bench's process, so ``wait_for`` runs unchanged. Each
run's enqueue->result is cut into segments:

- enqueue->start (the worker's side), start->finish (handler and settle),
- finish->wake: from the worker's settle reply to the reply of the waiter's
  BLMOVE and re-read (one pipeline: ``reads.wait_for``; Redis sends the
  settle's reply and the waiter's in the same turn of its loop),
- wake->result: from that reply to ``handle.result()`` returning,
- or, for a run over before its waiter's first read, finish->first read.

Prints each segment's percentiles over all runs and its mean over the
slowest 1 % and 5 % by enqueue->result, the waiters' loop turns, BLMOVE
timeouts (a wake-up missed or late: the re-read after 50 ms .. 1 s) and the
connections the pool opened during the phase.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from redflow.bench.phases import drain, open_bench, paced_runs, preload, wait_warm  # noqa: E402
from redflow.bench.probe import percentiles  # noqa: E402
from redflow.bench.report import load_text, machine  # noqa: E402
from redflow.store import reads  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

Calls = dict[str, list[tuple[str, float, float, Any]]]  # run id -> (call, sent, returned, reply)


def instrument(client: Any, calls: Calls, opened: list[float]) -> None:
    """Wrap the waiters' calls on this client object (instance attributes: the class is untouched)."""
    read_state, wait_then_read = client.read_state, reads._wait_then_read
    pool = client.redis.connection_pool
    make_connection = pool.make_connection

    def timed_read_state(run_id: str, *, watch: bool = False) -> Any:
        sent = time.time()
        state = read_state(run_id, watch=watch)
        calls[run_id].append(("read", sent, time.time(), state.status if state else None))
        return state

    def timed_wait_then_read(store: Any, run_id: str, done_key: str, block_s: float) -> Any:
        sent = time.time()
        state = wait_then_read(store, run_id, done_key, block_s)
        calls[run_id].append(("blmove", sent, time.time(), state if state is not None and state.is_terminal else None))
        return state

    def counted_make_connection() -> Any:
        opened.append(time.time())
        return make_connection()

    client.read_state, pool.make_connection = timed_read_state, counted_make_connection
    reads._wait_then_read = timed_wait_then_read  # the bench's own process: every waiter in it


class GcPauses:
    """Python's garbage collections in this process (worker, waiters and producer alike): (start, end, generation)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.time()
        else:
            self.pauses.append((self._began, time.time(), int(info["generation"])))

    def within(self, start: float, end: float) -> float:
        """Seconds of collection between ``start`` and ``end``."""
        return sum(min(end, b) - max(start, a) for a, b, _ in self.pauses if b > start and a < end)


def segments(
    sent: float, result: float, timing: Any, calls: list[tuple[str, float, float, Any]], gcs: GcPauses, opened: list[float]
) -> dict[str, float]:
    out = {
        "enqueue->result": result - sent,
        "connections opened meanwhile": float(sum(1 for at in opened if sent <= at <= result)),
        "in a garbage collection": gcs.within(sent, result),
        "enqueue->start": timing.started_at - sent,
        "start->finish": timing.finished_at - timing.started_at,
        "turns": float(sum(1 for call in calls if call[0] == "read")),
        "blmove timeouts": float(sum(1 for call in calls if call[0] == "blmove" and call[3] is None)),
    }
    wakes = [call for call in calls if call[0] == "blmove" and call[3] is not None]
    if wakes:
        woke = wakes[-1][2]
        out["finish->wake"] = woke - timing.finished_at
        out["wake->result"] = result - woke
    else:
        out["finish->first read"] = result - timing.finished_at
    return out


def report(rows: list[dict[str, float]], opened: list[float], gcs: GcPauses) -> list[str]:
    ordered = sorted(rows, key=lambda row: row["enqueue->result"])
    tails = {"slowest 5 %": ordered[-max(1, len(ordered) // 20) :], "slowest 1 %": ordered[-max(1, len(ordered) // 100) :]}
    names = [
        "enqueue->result",
        "enqueue->start",
        "start->finish",
        "finish->wake",
        "wake->result",
        "finish->first read",
        "in a garbage collection",
    ]
    lines = ["| segment (ms) | runs | p50 | p99 | max | " + " | ".join(f"mean, {t}" for t in tails) + " |", "|---" * (5 + len(tails)) + "|"]
    for name in names:
        values = [row[name] for row in rows if name in row]
        if not values:
            continue
        p = percentiles(values)
        means = [statistics.fmean(row[name] for row in tail if name in row) * 1000 if any(name in row for row in tail) else 0.0
                 for tail in tails.values()]  # fmt: skip
        cells = " | ".join(f"{mean:.2f}" for mean in means)
        lines.append(f"| {name} | {len(values)} | {p['p50']:.2f} | {p['p99']:.2f} | {p['max']:.2f} | {cells} |")
    for tail, tail_rows in tails.items():
        lines.append(f"{tail}: {sum(1 for row in tail_rows if row['connections opened meanwhile'])} of {len(tail_rows)} runs "
                     "waited while the client's pool opened a connection")  # fmt: skip
    turns = [row["turns"] for row in rows]
    timeouts = sum(row["blmove timeouts"] for row in rows)
    lines += [
        "",
        f"waiter turns (reads) per run: mean {statistics.fmean(turns):.2f}, max {max(turns):.0f}; BLMOVE timeouts: {timeouts:.0f}; "
        f"over before the first read: {sum(1 for row in rows if 'finish->first read' in row)}; "
        f"connections the client's pool opened during the phase: {len(opened)}",
        "garbage collections during the phase, by generation: "
        + ", ".join(
            f"gen {g}: {sum(1 for *_, gen in gcs.pauses if gen == g)} (longest "
            f"{max([(b - a) * 1000 for a, b, gen in gcs.pauses if gen == g], default=0):.1f} ms)"
            for g in (0, 1, 2)
        ),
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=200.0, help="runs/s (default 200)")
    parser.add_argument("--runs", type=int, default=2000, help="paced runs (default 2000)")
    parser.add_argument("-c", type=int, default=500, help="worker slots (default 500)")
    parser.add_argument("--worker", choices=("in-process", "subprocess"), default="in-process",
                        help="subprocess: the worker's times are whole milliseconds from the run hashes")  # fmt: skip
    parser.add_argument("--drain", type=int, default=20000, help="runs drained first, as redflow-gevent bench does (default 20000)")
    args = parser.parse_args(argv)
    before = machine()
    calls: Calls = defaultdict(list)
    opened: list[float] = []
    with RedisServer() as server, open_bench(server.url, args.c, subprocess=args.worker == "subprocess") as bench:
        staged = preload(bench, args.drain) if args.drain else None
        bench.worker.start()
        if staged is not None:
            drain(bench, staged)
        wait_warm(bench)
        instrument(bench.client, calls, opened)
        gcs = GcPauses()
        gc.callbacks.append(gcs)
        try:
            sent, results, _ = paced_runs(bench, args.runs, args.rate)
        finally:
            gc.callbacks.remove(gcs)
        timings = bench.worker.timings(sent)
    rows = [segments(at, results[run_id], timings[run_id], calls[run_id], gcs, opened) for run_id, at in sent.items()]
    print(f"{before['date']}: {before['cpus']} CPU(s) {before['cpu']}, load average {load_text(before['load_average'])} before, "
          f"{load_text(machine()['load_average'])} after; {args.runs} runs at {args.rate:.0f}/s after a drain of {args.drain}, "
          f"-c {args.c}, {args.worker} worker\n")  # fmt: skip
    print("\n".join(report(rows, opened, gcs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
