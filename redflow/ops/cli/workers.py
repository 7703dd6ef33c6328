"""``redflow-gevent workers``: the live workers, from their heartbeat records
(read by :mod:`redflow.ops.views.workers`)."""

from __future__ import annotations

import argparse
from typing import Any

from redflow.client import RedflowClient
from redflow.ops.cli.common import command, common_options, emit
from redflow.ops.format import fmt_seconds, fmt_time, format_table
from redflow.ops.views.workers import as_json, list_workers


def _workers(client: RedflowClient, args: argparse.Namespace) -> int:
    views = list_workers(client)
    rows = [
        (v.record.id, v.record.host, v.record.pid, v.state, f"{v.record.busy}/{v.record.slots}", v.record.done,
         ",".join(v.record.queues), fmt_time(v.record.started_at), fmt_seconds(v.seen_s_ago) + " ago")
        for v in views
    ]  # fmt: skip
    headers = ("ID", "HOST", "PID", "STATE", "BUSY", "DONE", "QUEUES", "STARTED (UTC)", "LAST BEAT")
    emit(args, [as_json(v) for v in views], format_table(headers, rows) if views else "(no workers)")
    return 0


def register(subparsers: Any) -> None:
    """Add ``workers`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    parser = subparsers.add_parser("workers", parents=[common_options()], help="live workers, from their heartbeats")
    parser.set_defaults(func=command(_workers))
