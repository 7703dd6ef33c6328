"""``redflow-gevent runs list|show|cancel|retry|signal|purge``: runs by filters and one
run with its steps, as a table or JSON; one run or every matching run retried
or canceled (``--all``, confirmed or ``--yes``); a signal sent (``run_signal``); finished runs purged.
``runs tail`` is :mod:`redflow.ops.cli.tail`.

Selecting and acting are :mod:`redflow.ops.control`'s, shared with the
dashboard; this module is the options and the words on the terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from redflow.client import RedflowClient
from redflow.core.errors import RedflowError
from redflow.core.keys import RUN_STATUSES
from redflow.core.models import Run, Step
from redflow.core.retention import FINISHED_STATUSES
from redflow.ops.cli import run_signal, tail
from redflow.ops.cli.common import command, common_options, emit, jsonable
from redflow.ops.cli.values import duration_s, positive_int
from redflow.ops.control import bulk
from redflow.ops.control.bulk import Filters
from redflow.ops.control.runs import ActionResult, cancel_run, retry_run
from redflow.ops.format import (
    describe_wait,
    fmt_attempt,
    fmt_duration,
    fmt_error,
    fmt_seconds,
    fmt_step_outcome,
    fmt_step_status,
    fmt_time,
    format_table,
    preview,
)
from redflow.ops.views.policies import RunPolicy, policy_facts, run_policy
from redflow.store.bulk import CANCELABLE, RETRYABLE


def register(subparsers: Any) -> None:
    """Add ``runs list|show|cancel|retry|purge`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    common = common_options()
    runs = subparsers.add_parser("runs", help="list, show, cancel, retry, signal, purge runs, or tail one's output stream")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True)
    listing = runs_sub.add_parser("list", parents=[common], help="recent runs, newest first")
    add_list_options(listing)
    listing.set_defaults(func=command(runs_list))
    show = runs_sub.add_parser("show", parents=[common], help="one run and its steps")
    show.add_argument("run_id")
    show.set_defaults(func=command(_runs_show))
    cancel = runs_sub.add_parser("cancel", parents=[common], help="cancel a run (exit 1 if it already ended), or --all matching")
    add_bulk_options(cancel, "cancel")
    cancel.add_argument("--reason", default=None)
    cancel.set_defaults(func=command(lambda client, args: runs_action(client, args, "cancel")))
    retry = runs_sub.add_parser("retry", parents=[common], help="run a failed or canceled run again (exit 1 otherwise), or --all matching")
    add_bulk_options(retry, "retry")
    retry.set_defaults(func=command(lambda client, args: runs_action(client, args, "retry")))
    run_signal.register(runs_sub, common)

    purge = runs_sub.add_parser("purge", parents=[common], help="delete finished runs that ended long enough ago (never a live run)")
    purge.add_argument("--older-than", type=duration_s, required=True, metavar="DURATION", help="e.g. 90s, 15m, 1h, 7d")
    purge.add_argument("--status", choices=FINISHED_STATUSES, help="only runs that ended in this status")
    purge.add_argument("--workflow", help="only runs of this workflow")
    purge.add_argument("--dry-run", action="store_true", help="count them, delete nothing")
    purge.set_defaults(func=command(_runs_purge))
    tail.register(runs_sub, common)


def add_filter_options(parser: argparse.ArgumentParser, *, status_help: str, statuses: Sequence[str] = RUN_STATUSES) -> None:
    parser.add_argument("--workflow", help="only runs of this workflow")
    parser.add_argument("--status", choices=statuses, help=status_help)
    parser.add_argument("--tag", action=_TagFilter, metavar="KEY=VALUE", help="only runs with this tag (repeat for several)")


class _TagFilter(argparse.Action):
    """``--tag KEY=VALUE``, repeatable: each checked with those before it as
    argparse reads it, so that a bad one is a usage error (exit 2)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any, option: str | None = None) -> None:
        texts = [*(getattr(namespace, self.dest, None) or ()), str(value)]
        try:
            bulk.parse_tags(texts)
        except RedflowError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        setattr(namespace, self.dest, texts)


def add_list_options(parser: argparse.ArgumentParser) -> None:
    """``runs list`` options: filters, ``--limit`` and ``--cursor``."""
    add_filter_options(parser, status_help="only runs in this status")
    parser.add_argument("--limit", type=positive_int, default=20, help="at most this many (default 20)")
    parser.add_argument("--cursor", default=None, help="continue a listing (printed after a page that has more)")


def add_bulk_options(parser: argparse.ArgumentParser, action: str) -> None:
    """``runs retry|cancel`` take a run id, or ``--all`` with filters."""
    statuses = RETRYABLE if action == "retry" else CANCELABLE
    allowed = " or ".join(statuses)
    parser.add_argument("run_id", nargs="?", help="the run (or --all with filters)")
    parser.add_argument("--all", action="store_true", help=f"every {allowed} run matching the filters")
    add_filter_options(parser, status_help=f"with --all: only runs in this status ({allowed}; default: all of them)", statuses=statuses)
    parser.add_argument("--dry-run", action="store_true", help="with --all: only count the runs it would act on")
    parser.add_argument("--yes", action="store_true", help="with --all: do not ask for confirmation")


def runs_list(client: RedflowClient, args: argparse.Namespace) -> int:
    page = client.list_runs(
        workflow=args.workflow, status=args.status, tags=bulk.parse_tags(args.tag), limit=args.limit, cursor=args.cursor
    )
    emit(args, {"runs": list(page), "cursor": page.cursor}, runs_table(page) if page else "(no runs)")
    if page.cursor and not args.json:  # on stderr: stdout stays the table
        print(f"(more may match: --cursor {page.cursor})", file=sys.stderr)
    return 0


def runs_action(client: RedflowClient, args: argparse.Namespace, action: str) -> int:
    """``runs retry|cancel``: one run by id, or ``--all`` matching the filters."""
    if not args.all:
        if not args.run_id:
            raise argparse.ArgumentError(None, f"runs {action} needs a run id, or --all with filters")
        if args.workflow or args.status or args.tag or args.dry_run:
            raise argparse.ArgumentError(None, "--workflow, --status, --tag and --dry-run go with --all")
        result: ActionResult = retry_run(client, args.run_id) if action == "retry" else cancel_run(client, args.run_id, args.reason)
        emit(args, result, f"{result.run_id}: {result.message}")
        return 0 if result.ok else 1
    if args.run_id:
        raise argparse.ArgumentError(None, "give a run id or --all, not both")
    filters = Filters(args.workflow, args.status, bulk.parse_tags(args.tag))
    count = bulk.count_for(client, action, filters)
    if args.dry_run or count == 0:
        emit(args, {"action": action, "dry_run": True, "count": count}, bulk.summary(action, filters, count, dry_run=True))
        return 0
    if not args.yes and not _confirm(f"{action} {count} run(s) ({filters.describe()})? [y/N] "):
        print("nothing done", file=sys.stderr)
        return 1
    done = bulk.apply(client, action, filters, getattr(args, "reason", None))
    emit(args, {"action": action, "count": done}, bulk.summary(action, filters, done))
    return 0


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise argparse.ArgumentError(None, "standard input is not a terminal: add --yes to confirm, or --dry-run to count")
    print(question, end="", file=sys.stderr, flush=True)  # stdout stays the result's (--json)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _runs_show(client: RedflowClient, args: argparse.Namespace) -> int:
    run = client.get_run(args.run_id)
    if run is None:
        print(f"no run {args.run_id}", file=sys.stderr)
        return 1
    steps, policy = client.get_steps(args.run_id), run_policy(client, run)
    emit(args, {"run": jsonable(run), "steps": jsonable(steps), "policy": jsonable(policy)}, run_details(run, steps, policy))
    return 0


def _runs_purge(client: RedflowClient, args: argparse.Namespace) -> int:
    count = client.purge(older_than=args.older_than, status=args.status, workflow=args.workflow, dry_run=args.dry_run)
    what = " ".join(part for part in (args.status, f"{args.workflow!r}" if args.workflow else None) if part)
    verb = "would delete" if args.dry_run else "deleted"
    text = f"{verb} {count} {what + ' ' if what else ''}finished run(s) that ended over {fmt_seconds(args.older_than)} ago"
    emit(args, {"purged": count, "dry_run": args.dry_run}, text)
    return 0


def runs_table(runs: Sequence[Run]) -> str:
    rows = [(r.id, r.workflow, r.status, fmt_attempt(r), fmt_time(r.created_at), fmt_duration(r.started_at, r.finished_at)) for r in runs]
    return format_table(("ID", "WORKFLOW", "STATUS", "ATTEMPT", "CREATED (UTC)", "DURATION"), rows)


def run_details(run: Run, steps: Sequence[Step], policy: RunPolicy | None = None) -> str:
    fields = [
        ("run", run.id), ("workflow", run.workflow), ("queue", run.queue), ("status", run.status),
        ("attempt", fmt_attempt(run)), ("created", fmt_time(run.created_at)), ("started", fmt_time(run.started_at)),
        ("finished", fmt_time(run.finished_at)), ("input", preview(run.input, 200)),
        ("output", preview(run.output, 200) if run.status == "succeeded" else "-"), ("error", fmt_error(run.error)),
        ("cancel", run.cancel_reason or ("requested" if run.cancel_requested_at else "-")), ("parent", run.parent_run_id or "-"),
        ("tags", " ".join(f"{k}={v}" for k, v in run.tags.items()) or "-"),
        ("waiting", describe_wait(run, steps)), ("progress", preview(run.progress, 200) if run.progress is not None else "-"),
        *(policy_facts(policy, run.status) if policy is not None else ()),
    ]  # fmt: skip
    head = "\n".join(f"{name:<9} {value}" for name, value in fields)
    if not steps:
        return head + "\n\n(no steps)"
    rows = [(s.seq, s.name, fmt_step_status(s), fmt_duration(s.started_at, s.finished_at), fmt_step_outcome(s)) for s in steps]
    return head + "\n\n" + format_table(("SEQ", "STEP", "STATUS", "DURATION", "OUTPUT / ERROR"), rows)
