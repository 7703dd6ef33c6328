"""``redflow-gevent bench``: how fast a worker is, in figures a perf-regression run can check.

It starts a private redis-server (or uses ``--redis-url``), a worker (in
this process, or the real ``redflow-gevent worker`` command with
``--worker subprocess``) on the workflows of :mod:`redflow.bench.app`,
and measures a drain of ``-n`` runs, a paced load (``--rate``) and an idle
spell (``--idle``); see :mod:`redflow.bench.phases`. ``--json`` saves the
figures, ``--compare`` checks them against saved ones and exits 1 when one
is worse by more than ``--max-regression``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from redflow.bench import profile as bench_profile
from redflow.bench import report as bench_report
from redflow.bench.phases import Bench, drain, idle, kept_bytes_per_run, open_bench, paced, preload
from redflow.bench.probe import BenchError, process_sample
from redflow.store.connection import redacted_url
from redflow.testing import RedisServer, RedisServerError

EXIT_REGRESSION = 1
EXIT_FAILED = 2
DESCRIPTION = (
    "Start a private redis-server (or use --redis-url) and a worker on the bench workflows, drain -n runs, "
    "run a paced load (--rate) and an idle spell (--idle), and print throughput, latency percentiles, Redis "
    "round trips and commands per run, CPU per 1,000 runs and memory. --json saves the figures; --compare "
    "exits 1 when one is worse than the baseline's by more than --max-regression."
)


def register(subparsers: Any) -> None:
    """Add the ``bench`` sub-command (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    p = subparsers.add_parser("bench", help="measure a worker: throughput, latency, Redis commands, CPU, memory",
                              description=DESCRIPTION)  # fmt: skip
    p.add_argument("-c", "--concurrency", type=int, default=500, help="worker slots (default 500)")
    p.add_argument("-n", "--runs", type=int, default=20000, help="runs to drain (default 20000)")
    p.add_argument("--repeat", type=int, default=1, help="drains of -n runs each; the median one is reported (default 1)")
    p.add_argument("--steps", type=int, default=0, help="durable steps per run (default 0: a no-op workflow)")
    p.add_argument("--replay", action="store_true", help="store every step before the drain, so that all of them replay")
    p.add_argument("--rate", type=float, default=200.0, help="runs/s of the paced phase (default 200; 0 skips it)")
    p.add_argument("--paced-runs", type=int, default=1000, help="runs of the paced phase (default 1000)")
    p.add_argument("--idle", type=float, default=5.0, help="seconds of the idle phase (default 5; 0 skips it)")
    p.add_argument("--worker", choices=["in-process", "subprocess"], default="in-process",
                   help="in-process: hot-path timestamps; subprocess: the real worker command, CPU and memory of it alone")  # fmt: skip
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a phase may take (default 300)")
    p.add_argument("--profile", metavar="PATH", help="sample the worker with py-spy during the drain (collapsed stacks to PATH)")
    p.add_argument("--json", metavar="PATH", help="save the results as JSON")
    p.add_argument("--compare", metavar="BASELINE", help="compare with saved results; exit 1 on a regression")
    p.add_argument("--max-regression", type=float, default=0.10, help="with --compare: tolerated relative loss (default 0.10)")
    p.set_defaults(func=main)


def _check(args: argparse.Namespace) -> None:
    if min(args.concurrency, args.runs, args.repeat, args.paced_runs) < 1 or args.steps < 0:
        raise SystemExit("bench: -c, -n, --repeat and --paced-runs must be >= 1, --steps >= 0")
    if args.replay and args.steps == 0:
        raise SystemExit("bench: --replay needs --steps K > 0")
    if args.rate < 0 or args.idle < 0 or args.max_regression < 0:
        raise SystemExit("bench: --rate, --idle and --max-regression must be >= 0")


def main(args: argparse.Namespace) -> int:
    _check(args)
    if args.profile:
        bench_profile.py_spy_binary()  # missing: say so before measuring
    baseline = bench_report.load(args.compare) if args.compare else None  # a bad baseline fails before measuring
    try:
        with _redis(args.redis_url) as url, _worker_logs_at_warning():
            result = measure(args, url)
    except (BenchError, RedisServerError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(bench_report.render(result), flush=True)
    if "profile" in result:
        print(bench_profile.render(result["profile"]))
    if args.json:
        bench_report.save(result, args.json)
        print(f"saved {args.json}")
    if baseline is None:
        return 0
    rows = bench_report.compare(result, baseline, args.max_regression)
    print(bench_report.render_comparison(rows, args.max_regression, args.compare))
    return EXIT_REGRESSION if any(row.regressed for row in rows) else 0


@contextlib.contextmanager
def _worker_logs_at_warning() -> Iterator[None]:
    """The in-process worker's INFO lines (started, stopped) would land in the
    middle of the report: warnings and errors only, unless ``--log-level debug``."""
    logger = logging.getLogger("redflow")
    level = logger.level
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _redis(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with RedisServer() as server:
        yield server.url


def measure(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """Run the phases asked for; the result dict of :mod:`redflow.bench.report`."""
    options = dict(steps=args.steps, replay=args.replay, subprocess=args.worker == "subprocess", timeout_s=args.timeout)
    with open_bench(url, args.concurrency, progress=sys.stderr, cleanup=bool(args.redis_url), **options) as bench:
        result: dict[str, Any] = {"version": 1, "meta": _meta(args, bench, url)}
        kept_before = bench.probe.kept_bytes()
        batches = [preload(bench, args.runs) for _ in range(args.repeat)]
        bench.worker.start()
        drains = [drain(bench, staged, args.profile if index == 0 else None) for index, staged in enumerate(batches)]
        result["drain"] = dict(sorted(drains, key=lambda d: d["runs_per_s"])[len(drains) // 2])
        result["drain"]["repeats_runs_per_s"] = [d["runs_per_s"] for d in drains]
        result["drain"]["redis_bytes_kept_per_run"] = kept_bytes_per_run(bench, kept_before, args.runs * args.repeat)
        if args.profile:
            result["profile"] = bench_profile.summarize(args.profile)
        if args.rate > 0:
            result["paced"] = paced(bench, args.paced_runs, args.rate)
        if args.idle > 0:
            result["idle"] = idle(bench, args.idle)
        result["peak_rss_mb"] = process_sample(bench.worker.pid).peak_rss_mb
    return result


def _meta(args: argparse.Namespace, bench: Bench, url: str) -> dict[str, Any]:
    return {
        **bench_report.machine(),
        "redis": redacted_url(url) if args.redis_url else "private redis-server",
        "redis_version": bench.probe.server_version(),
        "worker": bench.worker.kind,
        "precise_timestamps": bench.worker.precise,
        "workflow": bench.workflow,
        "concurrency": args.concurrency,
        "runs": args.runs,
        "repeat": args.repeat,
        "steps": args.steps,
        "replay": args.replay,
        "rate": args.rate,
        "paced_runs": args.paced_runs,
        "idle_s": args.idle,
    }
