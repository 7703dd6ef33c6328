"""``redflow-gevent cron list|pause|resume|trigger``: the stored cron triggers
and their next fire times; pause, resume or fire one now, named by its id or
by its workflow's name (the changes are :mod:`redflow.ops.control.cron`'s,
shared with the dashboard)."""

from __future__ import annotations

import argparse
from typing import Any

from redflow.client import RedflowClient
from redflow.ops.cli.common import change_commands, command, common_options, emit
from redflow.ops.control import cron
from redflow.ops.format import fmt_time, format_table
from redflow.ops.views.crons import cron_entries


def _cron_list(client: RedflowClient, args: argparse.Namespace) -> int:
    entries = cron_entries(client)
    rows = [
        (e.id, e.workflow, e.queue, e.expression, e.timezone or "UTC", "paused" if e.paused_at else fmt_time(e.next_at), e.error or "")
        for e in entries
    ]
    headers = ("ID", "WORKFLOW", "QUEUE", "EXPRESSION", "TIMEZONE", "NEXT (UTC)", "ERROR")
    emit(args, entries, format_table(headers, rows) if entries else "(no cron triggers)")
    return 0


def register(subparsers: Any) -> None:
    """Add ``cron list|pause|resume|trigger <cron id or workflow>`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    common = common_options()
    cron_parser = subparsers.add_parser("cron", help="cron triggers")
    cron_sub = cron_parser.add_subparsers(dest="cron_command", required=True)
    cron_list = cron_sub.add_parser("list", parents=[common], help="cron triggers and their next fire times")
    cron_list.set_defaults(func=command(_cron_list))
    change_commands(
        cron_sub,
        common,
        (
            ("pause", cron.pause, "stop firing a cron trigger until resumed (survives restarts and deploys)"),
            ("resume", cron.resume, "fire a paused trigger again, from its next due time"),
            ("trigger", cron.trigger, "start one run of a cron trigger's workflow now"),
        ),
        metavar="CRON",
        id_help="the id `cron list` shows, or the workflow's name if it has one cron trigger",
        resolve=cron.resolve,
    )
