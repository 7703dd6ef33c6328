"""Schedules as data at run time, in words: pause, resume, trigger and delete
one (``redflow-gevent schedules ...``, :mod:`redflow.ops.cli.schedules`, and the
dashboard's schedules page). The changes are ``client.schedules``'; this says
what each did, the same way on the command line and in the dashboard."""

from __future__ import annotations

from dataclasses import dataclass

from redflow.client import RedflowClient
from redflow.ops.format import fmt_time


@dataclass(frozen=True, slots=True)
class ScheduleChange:
    """What pause / resume / trigger / delete did, in words (``ok``: it changed something)."""

    schedule_id: str
    ok: bool
    message: str
    run_id: str | None = None


def pause(client: RedflowClient, schedule_id: str) -> ScheduleChange:
    """Stop firing until resumed."""
    changed = client.schedules.pause(schedule_id)
    return ScheduleChange(schedule_id, changed, "paused" if changed else "already paused")


def resume(client: RedflowClient, schedule_id: str) -> ScheduleChange:
    """Fire again from the next tick after now (no catch-up of the ticks missed while paused)."""
    if not client.schedules.resume(schedule_id):
        return ScheduleChange(schedule_id, False, "not paused")
    schedule = client.schedules.get(schedule_id)
    next_at = schedule.next_run_at if schedule is not None else None
    return ScheduleChange(schedule_id, True, f"resumed; next run at {fmt_time(next_at)} UTC")


def trigger(client: RedflowClient, schedule_id: str, trigger_id: str | None = None) -> ScheduleChange:
    """Start one run now (the same ``trigger_id`` never starts a second)."""
    handle = client.schedules.trigger(schedule_id, trigger_id=trigger_id)
    return ScheduleChange(schedule_id, True, f"started run {handle.id}", handle.id)


def delete(client: RedflowClient, schedule_id: str) -> ScheduleChange:
    """Delete it; the runs it started stay."""
    client.schedules.delete(schedule_id)
    return ScheduleChange(schedule_id, True, "deleted (the runs it started stay)")
