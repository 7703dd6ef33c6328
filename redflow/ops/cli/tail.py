"""``redflow-gevent runs tail RUN_ID``: print a run's output stream (what its
handler gave ``ctx.stream``) as it is written, until the run ends.

One line per item: ``[attempt] value`` as JSON (``--json``: a JSON object per
line, ``{"id", "attempt", "at", "value"}``), then how the run ended (on stderr;
with ``--json``, a last line ``{"run", "status"}``). A run that ended long ago
prints its items and ends. Exit status: 0 once the run has ended, 1 for no such
run or a ``--timeout`` that passed first, 2 for a bad option.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.streams import check_after, check_timeout_s
from redflow.ops.cli.common import command
from redflow.ops.cli.values import EXIT_OK, argument_type


def register(runs_sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``runs tail`` under ``runs`` (see ``redflow.ops.cli.runs.register``)."""
    tail = runs_sub.add_parser("tail", parents=[common], help="print a run's output stream live, until the run ends")
    tail.add_argument("run_id")
    tail.add_argument("--after", type=argument_type(check_after), default=None, metavar="ITEM_ID", help="start after this item")
    tail.add_argument("--timeout", type=argument_type(_seconds), default=None, metavar="SECONDS", help="give up after this long")
    tail.set_defaults(func=command(runs_tail))


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")  # refused below, with the timeout's own words
    return check_timeout_s(value)


def runs_tail(client: RedflowClient, args: argparse.Namespace) -> int:
    for item in client.follow_stream(args.run_id, after=args.after, timeout=args.timeout):
        if args.json:
            line = codec.dumps({"id": item.id, "attempt": item.attempt, "at": item.written_at, "value": item.value})
        else:
            line = f"[{item.attempt}] {codec.dumps(item.value)}"
        print(line, flush=True)
    state = client.read_state(args.run_id)
    status = state.status if state is not None else "gone"
    if args.json:
        print(codec.dumps({"run": args.run_id, "status": status}), flush=True)
    else:
        print(f"run {args.run_id} ended: {status}", file=sys.stderr)
    return EXIT_OK
