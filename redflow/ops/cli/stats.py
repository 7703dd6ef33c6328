"""``redflow-gevent stats``: per-workflow counts, success rate and duration
percentiles over a window (computed by :mod:`redflow.ops.views.stats`)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from redflow.client import RedflowClient
from redflow.core.keys import RUN_STATUSES
from redflow.ops.cli.common import command, common_options, emit
from redflow.ops.cli.values import argument_type, positive_int
from redflow.ops.format import fmt_error, fmt_optional_s, fmt_rate, format_table
from redflow.ops.views.stats import DEFAULT_MAX_RUNS, parse_window, workflow_stats


def _stats(client: RedflowClient, args: argparse.Namespace) -> int:
    window_s = parse_window(args.window)
    stats = workflow_stats(client, window_s, max_runs=args.max_runs, workflows=[args.workflow] if args.workflow else None)
    rows = [
        (s.workflow + ("*" if s.partial else ""), s.runs, *(s.counts[st] for st in RUN_STATUSES), s.expired, s.skipped, s.collapsed,
         fmt_rate(s.success_rate),
         fmt_optional_s(s.p50_s), fmt_optional_s(s.p95_s), fmt_error(s.latest_error) if s.latest_error else "-")
        for s in stats
    ]  # fmt: skip
    headers = (
        "WORKFLOW",
        "RUNS",
        *(st.upper() for st in RUN_STATUSES),
        "EXPIRED",
        "SKIPPED",
        "COLLAPSED",
        "SUCCESS",
        "P50",
        "P95",
        "LATEST ERROR",
    )
    text = format_table(headers, rows) if stats else "(no workflows)"
    partial = [s for s in stats if s.partial]
    if partial:
        text += f"\n* figures from the newest {args.max_runs:,} runs of the window (--max-runs)"
    data = [{**dataclasses.asdict(s), "partial": s.partial} for s in stats]
    emit(args, {"window_s": window_s, "workflows": data}, f"runs created in the last {args.window}\n{text}")
    return 0


def _window(text: str) -> str:
    parse_window(text)  # refused as argparse reads it (exit 2), kept as typed for the report
    return text


def register(subparsers: Any) -> None:
    """Add ``stats`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    parser = subparsers.add_parser("stats", parents=[common_options()], help="per-workflow counts, success rate and duration percentiles")
    parser.add_argument("--window", type=argument_type(_window), default="1h",
                        help="runs created in the last 30m, 1h, 24h, 7d ... (default 1h)")  # fmt: skip
    parser.add_argument("--workflow", default=None, help="only this workflow")
    parser.add_argument("--max-runs", type=positive_int, default=DEFAULT_MAX_RUNS,
                        help=f"read at most this many of the newest runs per workflow (default {DEFAULT_MAX_RUNS:,})")  # fmt: skip
    parser.set_defaults(func=command(_stats))
