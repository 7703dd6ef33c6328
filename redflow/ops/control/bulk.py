"""Finding runs by workflow, status and tags, and acting on all of them: what
``runs list --tag``, ``runs retry|cancel --all`` and the dashboard's
filters and bulk buttons share, so that they select and say the same things.

The query itself is the client's (``list_runs``, ``count_matching``,
``retry_many``, ``cancel_many``: indexes, bounded pages, a cursor); this
module parses filters as people type them (``--tag customer=42``) and puts
bulk actions into words.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from redflow.client import RedflowClient
from redflow.core.errors import RedflowError
from redflow.core.keys import RUN_STATUSES
from redflow.core.tags import parse_tag
from redflow.ops.admin import ActionResult, cancel_run, emit, positive_int, retry_run, runs_table
from redflow.store.bulk import CANCELABLE, RETRYABLE

ACTIONS = ("retry", "cancel")


@dataclass(frozen=True, slots=True)
class Filters:
    """A run selection: workflow, status and tags, every given part must hold."""

    workflow: str | None = None
    status: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"workflow={self.workflow}"] if self.workflow else []
        parts += [f"status={self.status}"] if self.status else []
        parts += [f"{k}={v}" for k, v in self.tags.items()]
        return " ".join(parts) or "all runs"


def parse_tags(texts: Iterable[str] | None) -> dict[str, str]:
    """``["customer=42", "tenant=acme"]`` -> a tag filter; a key given twice is an error."""
    tags: dict[str, str] = {}
    for text in texts or ():
        key, value = parse_tag(text)
        if key in tags and tags[key] != value:
            raise RedflowError(f"tag {key!r} is given twice ({tags[key]!r} and {value!r}); a run has one value per tag")
        tags[key] = value
    return tags


def statuses_for(action: str, status: str | None) -> tuple[str, ...]:
    """The statuses a bulk ``action`` walks: the one given, or all it can act on."""
    allowed = RETRYABLE if action == "retry" else CANCELABLE
    if status is not None and status not in allowed:
        raise RedflowError(f"{action} --all acts on runs that are {' or '.join(allowed)}, not {status}")
    return (status,) if status else allowed


def count_for(client: RedflowClient, action: str, filters: Filters) -> int:
    """How many runs a bulk ``action`` would act on now (``--dry-run``)."""
    return sum(client.count_matching(filters.workflow, s, tags=filters.tags) for s in statuses_for(action, filters.status))


def apply(client: RedflowClient, action: str, filters: Filters, reason: str | None = None) -> int:
    """Run the bulk ``action``; returns how many runs it retried or canceled."""
    statuses_for(action, filters.status)  # a clear refusal before anything is done
    if action == "retry":
        return client.retry_many(workflow=filters.workflow, status=filters.status, tags=filters.tags)
    return client.cancel_many(workflow=filters.workflow, status=filters.status, tags=filters.tags, reason=reason)


def summary(action: str, filters: Filters, count: int, *, dry_run: bool = False) -> str:
    verb = {"retry": "retried", "cancel": "canceled or told to stop"}[action]
    if dry_run:
        return f"{count} run(s) would be {verb.split(' ')[0]} ({filters.describe()})"
    return f"{count} run(s) {verb} ({filters.describe()})"


# -- the command line ---------------------------------------------------------------


def add_filter_options(parser: argparse.ArgumentParser, *, status_help: str) -> None:
    parser.add_argument("--workflow", help="only runs of this workflow")
    parser.add_argument("--status", choices=RUN_STATUSES, help=status_help)
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="only runs with this tag (repeat for several)")


def add_list_options(parser: argparse.ArgumentParser) -> None:
    """``runs list`` options: filters, ``--limit`` and ``--cursor``."""
    add_filter_options(parser, status_help="only runs in this status")
    parser.add_argument("--limit", type=positive_int, default=20, help="at most this many (default 20)")
    parser.add_argument("--cursor", default=None, help="continue a listing (printed after a page that has more)")


def add_bulk_options(parser: argparse.ArgumentParser, action: str) -> None:
    """``runs retry|cancel`` take a run id, or ``--all`` with filters."""
    allowed = " or ".join(RETRYABLE if action == "retry" else CANCELABLE)
    parser.add_argument("run_id", nargs="?", help="the run (or --all with filters)")
    parser.add_argument("--all", action="store_true", help=f"every {allowed} run matching the filters")
    add_filter_options(parser, status_help=f"with --all: only runs in this status ({allowed}; default: all of them)")
    parser.add_argument("--dry-run", action="store_true", help="with --all: only count the runs it would act on")
    parser.add_argument("--yes", action="store_true", help="with --all: do not ask for confirmation")


def runs_list(client: RedflowClient, args: argparse.Namespace) -> int:
    page = client.list_runs(workflow=args.workflow, status=args.status, tags=parse_tags(args.tag), limit=args.limit, cursor=args.cursor)
    emit(args, list(page), runs_table(page) if page else "(no runs)")
    if page.cursor:  # on stderr: stdout stays a table, or a JSON list of runs
        print(f"(more may match: --cursor {page.cursor})", file=sys.stderr)
    return 0


def runs_action(client: RedflowClient, args: argparse.Namespace, action: str) -> int:
    """``runs retry|cancel``: one run by id, or ``--all`` matching the filters."""
    if not args.all:
        if not args.run_id:
            raise RedflowError(f"runs {action} needs a run id, or --all with filters")
        if args.workflow or args.status or args.tag or args.dry_run:
            raise RedflowError("--workflow, --status, --tag and --dry-run go with --all")
        result: ActionResult = retry_run(client, args.run_id) if action == "retry" else cancel_run(client, args.run_id, args.reason)
        emit(args, result, f"{result.run_id}: {result.message}")
        return 0 if result.ok else 1
    if args.run_id:
        raise RedflowError("give a run id or --all, not both")
    filters = Filters(args.workflow, args.status, parse_tags(args.tag))
    count = count_for(client, action, filters)
    if args.dry_run or count == 0:
        emit(args, {"action": action, "dry_run": True, "count": count}, summary(action, filters, count, dry_run=True))
        return 0
    if not args.yes and not _confirm(f"{action} {count} run(s) ({filters.describe()})? [y/N] "):
        print("nothing done", file=sys.stderr)
        return 1
    done = apply(client, action, filters, getattr(args, "reason", None))
    emit(args, {"action": action, "count": done}, summary(action, filters, done))
    return 0


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise RedflowError("standard input is not a terminal: add --yes to confirm, or --dry-run to count")
    print(question, end="", file=sys.stderr, flush=True)  # stdout stays the result's (--json)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
