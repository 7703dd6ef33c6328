"""``redflow-gevent schedules list|create|update|pause|resume|trigger|delete``:
schedules as data (``client.schedules``), with their next run. A value the
command cannot use (a bad cron expression, time zone, duration or JSON
input) exits 2; a schedule that is not there (or is there already, on
create), an unknown workflow, or a pause of a paused schedule exits 1
(:mod:`redflow.ops.cli.values`). The command knows workflows by what workers
synced: the input is checked against a workflow's schema when a tick starts
it (a refusal is the schedule's ``last_error``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from redflow.client import RedflowClient
from redflow.core import codec, cron
from redflow.core.models import Schedule
from redflow.core.schedules import OVERLAPS
from redflow.ops.cli.common import change_commands, command, common_options, emit
from redflow.ops.cli.values import argument_type, duration_s
from redflow.ops.control import schedules as control
from redflow.ops.format import fmt_setting_s, fmt_time, format_table

#: The options of create (all needed but the defaulted ones) and of update (any of them).
_FIELDS = ("workflow", "cron", "timezone", "input", "overlap", "catchup", "jitter")


def register(subparsers: Any) -> None:
    """Add ``schedules ...`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    common = common_options()
    parser = subparsers.add_parser("schedules", help="schedules as data: list, create, update, pause, resume, trigger, delete")
    sub = parser.add_subparsers(dest="schedules_command", required=True)
    listing = sub.add_parser("list", parents=[common], help="every schedule with its next run")
    listing.set_defaults(func=command(_list))
    create = sub.add_parser("create", parents=[common], help="a new schedule (it fires from its next tick on)")
    _schedule_options(create, creating=True)
    create.set_defaults(func=command(_create))
    update = sub.add_parser("update", parents=[common], help="change the fields given; a new cron, timezone or jitter moves its next tick")
    _schedule_options(update, creating=False)
    update.set_defaults(func=command(_update))
    change_commands(
        sub,
        common,
        (
            ("pause", control.pause, "stop firing until resumed"),
            ("resume", control.resume, "fire again from the next tick after now"),
            ("trigger", control.trigger, "start one run now, paused or not, whatever the overlap policy"),
            ("delete", control.delete, "delete the schedule (the runs it started stay)"),
        ),
        metavar="ID",
    )


def _schedule_options(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    """The schedule's fields; on update each is optional and only those given change."""
    unset: Any = argparse.SUPPRESS
    parser.add_argument("schedule_id", metavar="ID")
    parser.add_argument("--workflow", required=creating, default=unset, help="the workflow to start")
    parser.add_argument("--cron", type=argument_type(_expression), required=creating, default=unset, metavar="EXPR",
                        help="5 fields, or 6 with seconds first: '0 2 * * *'")  # fmt: skip
    parser.add_argument("--timezone", type=argument_type(_zone), default=None if creating else unset, metavar="ZONE",
                        help="IANA zone of the expression, e.g. Europe/Berlin (default UTC)")  # fmt: skip
    parser.add_argument("--input", type=_json, default=None if creating else unset, metavar="JSON", help="the runs' input (default null)")
    parser.add_argument("--overlap", choices=OVERLAPS, default="skip" if creating else unset,
                        help="while the last run is unfinished: skip the tick (default), allow it, or cancel it then start")  # fmt: skip
    parser.add_argument("--catchup", type=duration_s, default=0.0 if creating else unset, metavar="DURATION",
                        help="after downtime, start the ticks missed within this long (e.g. 1h; default 0: none)")  # fmt: skip
    parser.add_argument("--jitter", type=duration_s, default=0.0 if creating else unset, metavar="DURATION",
                        help="up to this much random delay per tick (default 0)")  # fmt: skip


def _expression(text: str) -> str:
    cron.validate(text)
    return text


def _zone(text: str) -> str:
    cron.validate("* * * * *", text)
    return text


def _json(text: str) -> Any:
    try:
        return codec.loads(text, what="--input")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _list(client: RedflowClient, args: argparse.Namespace) -> int:
    schedules = client.schedules.list()
    rows = [
        (s.id, s.workflow, s.cron, s.timezone or "UTC", "paused" if s.paused else fmt_time(s.next_run_at), s.overlap,
         fmt_setting_s(s.catchup) if s.catchup else "-", fmt_setting_s(s.jitter) if s.jitter else "-", s.last_run_id or "-",
         s.last_error or "")
        for s in schedules
    ]  # fmt: skip
    headers = ("ID", "WORKFLOW", "CRON", "TIMEZONE", "NEXT RUN (UTC)", "OVERLAP", "CATCHUP", "JITTER", "LAST RUN", "LAST ERROR")
    emit(args, schedules, format_table(headers, rows) if schedules else "(no schedules)")
    return 0


def _create(client: RedflowClient, args: argparse.Namespace) -> int:
    fields = {name: getattr(args, name) for name in _FIELDS}
    return _saved(args, lambda: client.schedules.create(args.schedule_id, **fields), "created")


def _update(client: RedflowClient, args: argparse.Namespace) -> int:
    fields = {name: getattr(args, name) for name in _FIELDS if hasattr(args, name)}
    if not fields:
        raise argparse.ArgumentError(None, f"schedules update needs at least one of {', '.join('--' + name for name in _FIELDS)}")
    return _saved(args, lambda: client.schedules.update(args.schedule_id, **fields), "updated")


def _saved(args: argparse.Namespace, save: Callable[[], Schedule], verb: str) -> int:
    schedule = save()
    when = "paused" if schedule.paused else f"next run at {fmt_time(schedule.next_run_at)} UTC"
    emit(args, schedule, f"{schedule.id}: {verb}; {when}")
    return 0
