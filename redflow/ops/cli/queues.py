"""``redflow-gevent queues``: runs per list of each queue, and flow control per
workflow with limits (runs running / limit, and held back)."""

from __future__ import annotations

import argparse
from typing import Any

from redflow.client import RedflowClient
from redflow.ops.cli.common import command, common_options, emit, jsonable
from redflow.ops.format import format_table
from redflow.ops.views.flow import flow_rows
from redflow.ops.views.queues import queue_counts


def _queues(client: RedflowClient, args: argparse.Namespace) -> int:
    """Counts per queue; then, per workflow with limits, runs running / limit and held
    (in JSON, under each queue's ``workflows``)."""
    counts, flows = queue_counts(client), flow_rows(client)
    rows = [(c.queue, c.ready, c.prioritized, c.processing, c.scheduled) for c in counts]
    text = format_table(("QUEUE", "READY", "PRIORITIZED", "PROCESSING", "SCHEDULED"), rows) if counts else "(no queues)"
    if flows:
        flow_table = [(f.workflow, f.queue, f.running_text, f.held, f.limits) for f in flows]
        text += "\n\n" + format_table(("WORKFLOW", "QUEUE", "RUNNING", "HELD", "LIMITS"), flow_table)
    data = [{**jsonable(c), "workflows": [jsonable(f) for f in flows if f.queue == c.queue]} for c in counts]
    emit(args, data, text)
    return 0


def register(subparsers: Any) -> None:
    """Add ``queues`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    queues = subparsers.add_parser(
        "queues", parents=[common_options()], help="ready / processing / scheduled counts per queue, and flow control per workflow"
    )
    queues.set_defaults(func=command(_queues))
