"""The dashboard's schedules page: every schedule (schedules as data) with its
next run, its last run and what it skipped, and pause / resume / trigger
buttons behind the token, as the cron buttons are (the acting and its words
are :mod:`redflow.ops.control.schedules`').

A schedule id travels in the form, not in the path, so that any id (one
with a slash too) can be acted on; the page echoes nothing from the request
but the id, escaped.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from redflow.client import RedflowClient
from redflow.core.errors import RedflowError, ScheduleNotFoundError
from redflow.core.models import Schedule
from redflow.core.schedules import MAX_ID_CHARS
from redflow.ops.control import schedules as control
from redflow.ops.dashboard.access import ACTIONS_OFF, authorize
from redflow.ops.dashboard.markup import h, run_link, table, when
from redflow.ops.dashboard.web import HttpError, one, read_form
from redflow.ops.format import fmt_setting_s
from redflow.store.schedules import SCHEDULE_TAG

log = logging.getLogger("redflow.dashboard")

#: The page, and its actions (POST, with the schedule's id in the form).
PAGE_PATH = "/schedules"
ACTIONS = {"pause": control.pause, "resume": control.resume, "trigger": control.trigger}
DONE = {"pause": "paused", "resume": "resumed", "trigger": "triggered"}


def schedules_page(client: RedflowClient, actions_enabled: bool, base: str) -> str:
    """The page body: the schedules table, and a word on what the columns mean."""
    schedules = client.schedules.list()
    rows = [_row(s, actions_enabled, base) for s in schedules]
    headers = ("schedule", "workflow", "cron", "next run (UTC)", "overlap", "ticks and last run", "")
    listing = table(headers, rows, "No schedules: create one with client.schedules.create or `redflow-gevent schedules create`.",
                    wrap=(0, 1, 2, 3, 4, 5))  # fmt: skip
    off = f'<p class="muted">{h(ACTIONS_OFF)}</p>' if schedules and not actions_enabled else ""
    return (
        f"<section><h2>Schedules ({len(schedules):,})</h2>{listing}{off}"
        '<p class="muted">A schedule links to the runs it started. Next run: the next tick plus its jitter. Ticks: those that '
        "started a run, those missed (no worker led the cron within the catch-up window) and those skipped because the last "
        "run was unfinished (overlap skip); then the run it started last. Cron triggers declared in code are on the "
        f'<a href="{h(base)}/">overview</a>.</p></section>'
    )


def _row(s: Schedule, actions_enabled: bool, base: str) -> list[str]:
    runs = f"{h(base)}/?{h(urlencode({'tag': f'{SCHEDULE_TAG}={s.id}'}))}"
    next_run = '<span class="badge status-canceled">paused</span>' if s.paused else when(s.next_run_at)
    ticks = "<br>".join(f'<span class="nowrap">{h(n)} {word}</span>'
                        for n, word in ((s.fired, "fired"), (s.skipped_late, "missed"), (s.skipped_overlap, "skipped")))  # fmt: skip
    last = f"<br>last {run_link(base, s.last_run_id, short=True)}" if s.last_run_id else ""
    if s.last_error:
        last += f'<br><span class="error-text">{h(s.last_error)}</span>'
    timing = "".join(f'<br><span class="muted">{h(label)} {h(fmt_setting_s(seconds))}</span>'
                     for label, seconds in (("catch-up", s.catchup), ("jitter", s.jitter)) if seconds)  # fmt: skip
    return [
        f'<a href="{runs}" title="the runs it started">{h(s.id)}</a>', h(s.workflow),
        f'<code>{h(s.cron)}</code><br><span class="muted">{h(s.timezone or "UTC")}</span>', next_run, h(s.overlap) + timing,
        ticks + last, _buttons(actions_enabled, base, s),
    ]  # fmt: skip


def _buttons(actions_enabled: bool, base: str, s: Schedule) -> str:
    """One form, two buttons (``formaction``: no script needed): pause or resume, and trigger."""
    if not actions_enabled:
        return ""
    first = "resume" if s.paused else "pause"
    return (
        f'<form class="action cron schedule" method="post" action="{h(base)}{PAGE_PATH}/{first}">'
        f'<input type="hidden" name="schedule" value="{h(s.id)}">'
        '<input type="password" name="token" placeholder="token" required autocomplete="current-password">'
        f'<button type="submit" title="{h(first)} {h(s.id)}">{first}</button>'
        f'<button type="submit" formaction="{h(base)}{PAGE_PATH}/trigger" title="start one run of {h(s.id)} now">trigger</button></form>'
    )


def route(client: RedflowClient, token: bytes | None, environ: dict[str, Any], path: str, method: str) -> tuple[str, str] | None:
    """Handle the page's POST actions (``token``: the dashboard's, None when actions are
    off): the title and message of the page saying what was done; None for another path."""
    prefix = PAGE_PATH + "/"
    action = path[len(prefix) :] if path.startswith(prefix) else ""
    if action not in ACTIONS:
        return None
    if method != "POST":
        raise HttpError("405 Method Not Allowed", "Use POST here.", [("Allow", "POST")])
    form = read_form(environ, max_fields=10)
    authorize(token, environ, form)
    schedule_id = one(form, "schedule") or ""
    if not 0 < len(schedule_id) <= MAX_ID_CHARS:
        raise HttpError("400 Bad Request", "Name the schedule (the form's schedule field).")
    try:
        change = ACTIONS[action](client, schedule_id)
    except ScheduleNotFoundError as exc:
        raise HttpError("404 Not Found", str(exc)) from None
    except RedflowError as exc:  # e.g. its workflow is unknown (trigger)
        raise HttpError("400 Bad Request", f"Not done: {exc}") from None
    log.info("dashboard: schedule %s %s: %s", action, schedule_id, change.message)
    return f"Schedule {DONE[action] if change.ok else action}", f"{schedule_id}: {change.message}"
