"""Inspection for people and scripts: ``runs``, ``queues`` and ``cron`` sub-commands.

The read-only queries here (queue counts, cron definitions, workflow names)
and the two actions (cancel, retry, reported in words) are shared with the
dashboard, so that the command line and the web page say the same things.
Output is an aligned table, or JSON with ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import RedisError

from redflow.client import RedflowClient, create_client
from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.core.models import WAIT_CHILDREN, WAIT_EVENT, WAIT_SLEEP, CronDef, Run, Step
from redflow.core.retention import FINISHED_STATUSES
from redflow.ops.limits_view import flow_rows
from redflow.ops.shown import shown_json
from redflow.registry import Registry
from redflow.store.connection import redacted_url, resolve_prefix, resolve_url

PREVIEW_CHARS = 60


# -- queries shared with the dashboard ------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many runs sit in each list of one queue (``prioritized``: runs with a
    priority > 0, waiting apart from ready, where one marker entry stands for them)."""

    queue: str
    ready: int
    processing: int
    scheduled: int
    prioritized: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class CronEntry:
    """A stored cron definition with its next fire time; ``error`` when it cannot be read."""

    id: str
    workflow: str
    queue: str
    expression: str
    timezone: str | None
    input: Any
    next_at: float | None
    error: str | None = None
    paused_at: float | None = None  # set while paused (``cron pause``)


@dataclasses.dataclass(frozen=True, slots=True)
class ActionResult:
    """What a cancel or retry did, in words a person can read."""

    run_id: str
    ok: bool
    status: str | None
    message: str


def workflow_names(client: RedflowClient) -> list[str]:
    """Names of the workflows some worker or client synced."""
    return sorted(client.redis.smembers(client.keys.workflows()))


def known_queues(client: RedflowClient) -> list[str]:
    """Queues named by synced workflows and triggers (see ``RedflowClient.known_queues``)."""
    return client.known_queues()


def index_queues(client: RedflowClient) -> list[str | None]:
    """The queues whose run indexes to read: every known one on a cluster (indexes are per queue
    there); ``[None]`` otherwise, the one global index."""
    return list(known_queues(client)) if client.keys.cluster else [None]


def queue_counts(client: RedflowClient, queues: Iterable[str] | None = None) -> list[QueueCounts]:
    """Ready / processing / scheduled / prioritized counts of ``queues`` (default: :func:`known_queues`), one round trip."""
    keys = client.keys
    names = list(queues) if queues is not None else known_queues(client)
    pipe = client.redis.pipeline(transaction=False)
    for queue in names:
        pipe.llen(keys.queue_ready(queue))
        pipe.llen(keys.queue_processing(queue))
        pipe.zcard(keys.queue_scheduled(queue))
        pipe.zcard(keys.queue_prioritized(queue))
    counts = pipe.execute()
    return [QueueCounts(queue, *counts[4 * i : 4 * i + 4]) for i, queue in enumerate(names)]


def cron_entries(client: RedflowClient) -> list[CronEntry]:
    """Every stored cron definition, soonest first; a broken one is listed with its error."""
    keys = client.keys
    pipe = client.redis.pipeline(transaction=False)
    pipe.hgetall(keys.cron_def())
    pipe.zrange(keys.cron_next(), 0, -1, withscores=True)
    pipe.hgetall(keys.cron_paused())
    definitions, schedule, paused = pipe.execute()
    next_ms = dict(schedule)
    entries = []
    for cron_id, raw in definitions.items():
        next_at = next_ms[cron_id] / 1000.0 if cron_id in next_ms else None
        paused_at = int(paused[cron_id]) / 1000.0 if str(paused.get(cron_id, "")).isdigit() else None
        try:
            d = CronDef.from_json(raw)
            run_input = codec.loads(d.input_json, what="cron input")
            entries.append(CronEntry(d.id, d.workflow, d.queue, d.expression, d.timezone, run_input, next_at, paused_at=paused_at))
        except RedflowError as exc:
            entries.append(CronEntry(cron_id, "?", "?", "?", None, None, next_at, error=str(exc), paused_at=paused_at))
    return sorted(entries, key=lambda e: (e.next_at is None, e.next_at or 0.0, e.id))


def cancel_run(client: RedflowClient, run_id: str, reason: str | None = None) -> ActionResult:
    """``client.cancel``, then say what happened (canceled now, or its worker told to stop it)."""
    done = client.cancel(run_id, reason=reason)
    run = client.get_run(run_id)
    status = run.status if run else None
    if run is None:
        return ActionResult(run_id, False, None, f"no run {run_id}")
    if not done:
        return ActionResult(run_id, False, status, f"not canceled: the run already ended ({status})")
    if status == "canceled":
        return ActionResult(run_id, True, status, "canceled")
    return ActionResult(run_id, True, status, "cancel requested: its worker stops it")


def retry_run(client: RedflowClient, run_id: str) -> ActionResult:
    """``client.retry``, then say what happened."""
    done = client.retry(run_id)
    run = client.get_run(run_id)
    if run is None:
        return ActionResult(run_id, False, None, f"no run {run_id}")
    if not done:
        why = (
            "a live worker holds it" if run.status == "running" else "only failed or canceled runs, or running runs no worker holds, retry"
        )
        return ActionResult(run_id, False, run.status, f"not retried: the run is {run.status} ({why})")
    return ActionResult(run_id, True, run.status, "queued again; its succeeded steps will replay")


# -- formatting ---------------------------------------------------------------


def fmt_time(t: float | None) -> str:
    """Unix seconds as UTC ``YYYY-mm-dd HH:MM:SS``; ``-`` for none."""
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def fmt_duration(start: float | None, end: float | None) -> str:
    return "-" if start is None or end is None else fmt_seconds(max(0.0, end - start))


def fmt_attempt(run: Run) -> str:
    return f"{run.attempt}/{run.max_attempts}"


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """Compact JSON of ``value``, cut to ``limit`` characters."""
    return shown_json(value, limit)


def fmt_error(error: dict[str, Any] | None) -> str:
    if not error:
        return "-"
    return f"{error.get('name', 'Error')}: {error.get('message', '')} ({error.get('kind', 'error')})"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns, two spaces apart."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def jsonable(obj: Any) -> Any:
    """Dataclasses (Run, Step, QueueCounts ...) as dicts, lists of them as lists."""
    if isinstance(obj, list):
        return [jsonable(item) for item in obj]
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else obj


def describe_wait(run: Run, steps: Sequence[Step]) -> str:
    """Why a parked run is ``scheduled`` (a durable wait), in words; ``-`` when it is not parked."""
    if run.status != "scheduled" or not run.parked_for:
        return "-"
    wait = next((s.wait for s in steps if s.name == run.parked_step and s.wait is not None), None)
    step = f"step {run.parked_step!r}"
    if run.parked_for == WAIT_SLEEP:
        return f"sleeping until {fmt_time(run.available_at)} ({step})"
    if run.parked_for == WAIT_EVENT:
        event = f"event {wait.event!r}" if wait is not None and wait.event else "an event"
        match = f" matching {preview(wait.match)}" if wait is not None and wait.match else ""
        timeout = f", times out {fmt_time(wait.timeout_at / 1000)}" if wait is not None and wait.timeout_at else ""
        return f"waiting for {event}{match} ({step}{timeout})"
    if run.parked_for == WAIT_CHILDREN:
        children = f"its {len(wait.children)} children" if wait is not None else "its children"
        return f"waiting for {children} to end ({step})"
    return f"parked: {run.parked_for} ({step})"


def fmt_step_outcome(step: Step, limit: int = PREVIEW_CHARS) -> str:
    """A step's output, its error, or what it waits for."""
    if step.error is not None:
        return fmt_error(step.error)
    if step.wait is not None:
        return f"(waiting: {step.wait.kind})"
    return preview(step.output, limit)


def runs_table(runs: Sequence[Run]) -> str:
    rows = [(r.id, r.workflow, r.status, fmt_attempt(r), fmt_time(r.created_at), fmt_duration(r.started_at, r.finished_at)) for r in runs]
    return format_table(("ID", "WORKFLOW", "STATUS", "ATTEMPT", "CREATED (UTC)", "DURATION"), rows)


def run_details(run: Run, steps: Sequence[Step]) -> str:
    fields = [
        ("run", run.id), ("workflow", run.workflow), ("queue", run.queue), ("status", run.status),
        ("attempt", fmt_attempt(run)), ("created", fmt_time(run.created_at)), ("started", fmt_time(run.started_at)),
        ("finished", fmt_time(run.finished_at)), ("input", preview(run.input, 200)),
        ("output", preview(run.output, 200) if run.status == "succeeded" else "-"), ("error", fmt_error(run.error)),
        ("cancel", run.cancel_reason or ("requested" if run.cancel_requested_at else "-")), ("parent", run.parent_run_id or "-"),
        ("tags", " ".join(f"{k}={v}" for k, v in run.tags.items()) or "-"),
        ("waiting", describe_wait(run, steps)), ("progress", preview(run.progress, 200) if run.progress is not None else "-"),
    ]  # fmt: skip
    head = "\n".join(f"{name:<9} {value}" for name, value in fields)
    if not steps:
        return head + "\n\n(no steps)"
    rows = [(s.seq, s.name, s.status, fmt_duration(s.started_at, s.finished_at), fmt_step_outcome(s)) for s in steps]
    return head + "\n\n" + format_table(("SEQ", "STEP", "STATUS", "DURATION", "OUTPUT / ERROR"), rows)


# -- the sub-commands -----------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(codec.dumps(jsonable(data)) if args.json else text)


def _runs_show(client: RedflowClient, args: argparse.Namespace) -> int:
    run = client.get_run(args.run_id)
    if run is None:
        print(f"no run {args.run_id}", file=sys.stderr)
        return 1
    steps = client.get_steps(args.run_id)
    emit(args, {"run": jsonable(run), "steps": jsonable(steps)}, run_details(run, steps))
    return 0


_DURATION_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def _duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1.5h``, ``7d`` or ``2w`` as seconds."""
    value = text.strip().lower()
    unit = _DURATION_UNITS_S.get(value[-1:], 0.0) if value else 0.0
    try:
        seconds = float(value[:-1] if unit else value) * (unit or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 90s, 15m, 1h, 7d)") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"a duration is >= 0 and finite, not {text!r}")
    return seconds


def _runs_purge(client: RedflowClient, args: argparse.Namespace) -> int:
    count = client.purge(older_than=args.older_than, status=args.status, workflow=args.workflow, dry_run=args.dry_run)
    what = " ".join(part for part in (args.status, f"{args.workflow!r}" if args.workflow else None) if part)
    verb = "would delete" if args.dry_run else "deleted"
    text = f"{verb} {count} {what + ' ' if what else ''}finished run(s) that ended over {fmt_seconds(args.older_than)} ago"
    emit(args, {"purged": count, "dry_run": args.dry_run}, text)
    return 0


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


def _cron_list(client: RedflowClient, args: argparse.Namespace) -> int:
    entries = cron_entries(client)
    rows = [
        (e.id, e.workflow, e.queue, e.expression, e.timezone or "UTC", "paused" if e.paused_at else fmt_time(e.next_at), e.error or "")
        for e in entries
    ]
    headers = ("ID", "WORKFLOW", "QUEUE", "EXPRESSION", "TIMEZONE", "NEXT (UTC)", "ERROR")
    emit(args, entries, format_table(headers, rows) if entries else "(no cron triggers)")
    return 0


def connect(args: argparse.Namespace) -> RedflowClient:
    """A client for ``--redis-url`` / ``--prefix`` (else ``REDIS_URL`` / ``REDFLOW_PREFIX``)."""
    return create_client(resolve_url(args.redis_url), prefix=resolve_prefix(args.prefix), registry=Registry())


def command(fn: Callable[[RedflowClient, argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn`` with a client; Redis and data errors become a message and an exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            client = connect(args)
        except ValueError as exc:  # redis-py's word on a malformed URL
            print(f"error: bad Redis URL {redacted_url(resolve_url(args.redis_url))}: {exc}", file=sys.stderr)
            return 2
        try:
            return fn(client, args)
        except RedisError as exc:
            print(f"error: Redis at {redacted_url(resolve_url(args.redis_url))}: {exc}", file=sys.stderr)
            return 2
        except RedflowError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            client.close()

    return run


def connection_options(parser: argparse.ArgumentParser) -> None:
    """``--redis-url`` and ``--prefix``, as on the worker command."""
    parser.add_argument("--redis-url", default=None, help="default: $REDIS_URL or redis://127.0.0.1:6379/0")
    parser.add_argument("--prefix", default=None, help="key prefix (default: $REDFLOW_PREFIX or redflow:v1)")


def common_options() -> argparse.ArgumentParser:
    """The options every inspection command takes: ``--redis-url``, ``--prefix`` and ``--json``."""
    common = argparse.ArgumentParser(add_help=False)
    connection_options(common)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return common


def register(subparsers: Any) -> None:
    """Add ``runs list|show|cancel|retry|purge``, ``queues`` and ``cron list|pause|resume|trigger``."""
    from redflow.ops import cron_control, run_search  # they build on this module

    common = common_options()

    runs = subparsers.add_parser("runs", help="list, show, cancel, retry or purge runs")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True)
    listing = runs_sub.add_parser("list", parents=[common], help="recent runs, newest first")
    run_search.add_list_options(listing)
    listing.set_defaults(func=command(run_search.runs_list))
    show = runs_sub.add_parser("show", parents=[common], help="one run and its steps")
    show.add_argument("run_id")
    show.set_defaults(func=command(_runs_show))
    cancel = runs_sub.add_parser("cancel", parents=[common], help="cancel a run (exit 1 if it already ended), or --all matching")
    run_search.add_bulk_options(cancel, "cancel")
    cancel.add_argument("--reason", default=None)
    cancel.set_defaults(func=command(lambda client, args: run_search.runs_action(client, args, "cancel")))
    retry = runs_sub.add_parser("retry", parents=[common], help="run a failed or canceled run again (exit 1 otherwise), or --all matching")
    run_search.add_bulk_options(retry, "retry")
    retry.set_defaults(func=command(lambda client, args: run_search.runs_action(client, args, "retry")))

    purge = runs_sub.add_parser("purge", parents=[common], help="delete finished runs that ended long enough ago (never a live run)")
    purge.add_argument("--older-than", type=_duration, required=True, metavar="DURATION", help="e.g. 90s, 15m, 1h, 7d")
    purge.add_argument("--status", choices=FINISHED_STATUSES, help="only runs that ended in this status")
    purge.add_argument("--workflow", help="only runs of this workflow")
    purge.add_argument("--dry-run", action="store_true", help="count them, delete nothing")
    purge.set_defaults(func=command(_runs_purge))

    queues = subparsers.add_parser(
        "queues", parents=[common], help="ready / processing / scheduled counts per queue, and flow control per workflow"
    )
    queues.set_defaults(func=command(_queues))

    cron = subparsers.add_parser("cron", help="cron triggers")
    cron_sub = cron.add_subparsers(dest="cron_command", required=True)
    cron_list = cron_sub.add_parser("list", parents=[common], help="cron triggers and their next fire times")
    cron_list.set_defaults(func=command(_cron_list))
    cron_control.register(cron_sub, common, command)
