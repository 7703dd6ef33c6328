"""``redflow-gevent bench``: how fast a worker is, in figures a perf-regression run can check.

It starts a private redis-server (or uses ``--redis-url``), a worker (in
this process, or the real ``redflow-gevent worker`` command with
``--worker subprocess``) on the workflows of :mod:`redflow.bench.app`,
and measures a drain of ``-n`` runs, a paced load (``--rate``) and an idle
spell (``--idle``); see :mod:`redflow.bench.phases`. ``--json`` saves the
figures, ``--compare`` checks them against saved ones and exits 1 when one
is worse by more than ``--max-regression``. A baseline measured another way
(another ``--worker``, ``--steps`` or ``--replay``) is refused before anything
is measured (exit 2); one taken with other settings or on another machine is
compared with a warning naming the differences.
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
from redflow.core.errors import RedflowError
from redflow.ops.cli.values import EXIT_NO, EXIT_USAGE, non_negative_float, non_negative_int, positive_int, usage_error
from redflow.store.connection import redacted_url
from redflow.testing import RedisServer, RedisServerError

EXIT_REGRESSION = EXIT_NO
EXIT_FAILED = EXIT_USAGE
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
    p.add_argument("-c", "--concurrency", type=positive_int, default=500, help="worker slots (default 500)")
    p.add_argument("-n", "--runs", type=positive_int, default=20000, help="runs to drain (default 20000)")
    p.add_argument("--repeat", type=positive_int, default=1, help="drains of -n runs each; the median one is reported (default 1)")
    p.add_argument("--steps", type=non_negative_int, default=0, help="durable steps per run (default 0: a no-op workflow)")
    p.add_argument("--replay", action="store_true", help="store every step before the drain, so that all of them replay")
    p.add_argument("--rate", type=non_negative_float, default=200.0, help="runs/s of the paced phase (default 200; 0 skips it)")
    p.add_argument("--paced-runs", type=positive_int, default=1000, help="runs of the paced phase (default 1000)")
    p.add_argument("--idle", type=non_negative_float, default=5.0, help="seconds of the idle phase (default 5; 0 skips it)")
    p.add_argument("--worker", choices=["in-process", "subprocess"], default="in-process",
                   help="in-process: hot-path timestamps; subprocess: the real worker command, CPU and memory of it alone")  # fmt: skip
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a phase may take (default 300)")
    p.add_argument("--profile", metavar="PATH", help="sample the worker with py-spy during the drain (collapsed stacks to PATH)")
    p.add_argument("--json", metavar="PATH", help="save the results as JSON")
    p.add_argument("--compare", metavar="BASELINE", help="compare with saved results (measured with the same --worker, "
                   "--steps and --replay); exit 1 on a regression")  # fmt: skip
    p.add_argument("--max-regression", type=non_negative_float, default=0.10,
                   help="with --compare: tolerated relative loss (default 0.10)")  # fmt: skip
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.replay and args.steps == 0:
        usage_error("bench: --replay needs --steps K > 0")
    if args.profile:
        bench_profile.py_spy_binary()  # missing: say so before measuring
    baseline = _baseline(args) if args.compare else None  # a bad or foreign baseline fails before measuring
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
    return _compare(args, result, baseline)


def _planned_meta(args: argparse.Namespace) -> dict[str, Any]:
    """The ``meta`` fields a bench with ``args`` will save, known before it measures."""
    options = {"worker": args.worker, "steps": args.steps, "replay": args.replay, "concurrency": args.concurrency, "runs": args.runs,
               "repeat": args.repeat, "rate": args.rate, "paced_runs": args.paced_runs, "idle_s": args.idle}  # fmt: skip
    return {**bench_report.machine(), **options}


def _baseline(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--compare`` file, if it was measured as this bench will be; else a usage error."""
    try:
        baseline = bench_report.load(args.compare)
    except RedflowError as exc:
        usage_error(f"bench --compare: {exc}")
    differ = bench_report.mismatches(baseline["meta"], _planned_meta(args), bench_report.SAME_KIND)
    if differ:
        usage_error(
            f"bench --compare {args.compare}: measured another way ({'; '.join(map(str, differ))}), so its figures "
            "cannot be compared with this bench's (a subprocess worker's latencies are whole milliseconds from the run "
            "hashes, steps add commands per run): bench with the baseline's options, or save a new baseline with --json"
        )
    return baseline


def _compare(args: argparse.Namespace, result: dict[str, Any], baseline: dict[str, Any]) -> int:
    """Print the comparison; exit 1, saying why, when a figure regressed."""
    differ = bench_report.mismatches(baseline["meta"], result["meta"], bench_report.SAME_SETTING)
    if differ:
        print(f"warning: the baseline was taken with other settings or elsewhere ({'; '.join(map(str, differ))}): "
              "figures may differ for that alone")  # fmt: skip
    rows = bench_report.compare(result, baseline, args.max_regression)
    print(bench_report.render_comparison(rows, args.max_regression, args.compare))
    regressed = [row.path for row in rows if row.regressed]
    if not regressed:
        return 0
    print(f"bench: exit status {EXIT_REGRESSION}: {len(regressed)} figure(s) worse than {args.compare}'s by more than "
          f"--max-regression {args.max_regression:.0%}: {', '.join(regressed)}", file=sys.stderr)  # fmt: skip
    return EXIT_REGRESSION


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
