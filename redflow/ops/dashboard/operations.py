"""The dashboard's operator controls (issue 18): run filters by workflow,
status and tag with paging, tags on runs, bulk retry / cancel of a filtered
list, and cron pause / resume / trigger.

The pages call :func:`runs_section`, :func:`crons_section` and
:func:`tags_html`, the app :func:`route`; this module renders and handles the
rest (the selecting and acting are :mod:`redflow.ops.control`'s). The rules are the dashboard's: every value is
escaped, no script runs in the page, actions are POST only behind the token,
and a result page says what was done with nothing from the request echoed
but the filters, escaped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from redflow.client import RedflowClient
from redflow.core.errors import RedflowError
from redflow.core.models import Run
from redflow.core.tags import MAX_TAGS
from redflow.ops.control import bulk, cron
from redflow.ops.control.bulk import Filters
from redflow.ops.dashboard.access import ACTIONS_OFF, authorize
from redflow.ops.dashboard.markup import badge, h, run_link, table, when
from redflow.ops.dashboard.web import HttpError, one, read_form
from redflow.ops.format import fmt_attempt, fmt_duration, fmt_error
from redflow.ops.views.crons import cron_entries
from redflow.store.bulk import CANCELABLE, RETRYABLE

log = logging.getLogger("redflow.dashboard")

_BULK_PATH = re.compile(r"/bulk/(retry|cancel)")
_CRON_PATH = re.compile(r"/cron/([^/]{1,200})/(pause|resume|trigger)")
CRON_DONE = {"pause": "paused", "resume": "resumed", "trigger": "triggered"}


def tags_html(tags: Mapping[str, str], base: str = "") -> str:
    """Tags as small labels, each a link to the runs with that tag (a narrow column may break one after its ``=``)."""
    links = (f'<a class="tag" href="{h(base)}/?{h(urlencode({"tag": f"{k}={v}"}))}">{h(k)}=<wbr>{h(v)}</a>' for k, v in tags.items())
    return " ".join(links)


def filters_from(query: dict[str, list[str]]) -> tuple[Filters, str | None]:
    """Tag filters (``tag=key=value``, repeated) and the cursor of the query string; 400 on bad ones."""
    texts = [t for t in query.get("tag", []) if t.strip()]
    if len(texts) > MAX_TAGS:
        raise HttpError("400 Bad Request", f"At most {MAX_TAGS} tag filters.")
    try:
        tags = bulk.parse_tags(t.strip() for t in texts)
    except RedflowError as exc:
        raise HttpError("400 Bad Request", f"Bad tag filter: {exc}") from None
    cursor = one(query, "cursor") or None
    if cursor is not None and len(cursor) > 600:
        raise HttpError("400 Bad Request", "The cursor is too long.")
    return Filters(one(query, "workflow") or None, one(query, "status") or None, tags), cursor


def _query(filters: Filters, **more: Any) -> str:
    pairs: list[tuple[str, Any]] = [(k, v) for k, v in (("workflow", filters.workflow), ("status", filters.status)) if v]
    pairs += [("tag", f"{k}={v}") for k, v in filters.tags.items()]
    pairs += [(k, v) for k, v in more.items() if v is not None]
    return urlencode(pairs)


def runs_section(client: RedflowClient, actions_enabled: bool, base: str, query: dict[str, list[str]], limit: int) -> tuple[str, str]:
    """The runs table with tags, a next-page link and the bulk forms, and the tag filter's input (both HTML)."""
    filters, cursor = filters_from(query)
    try:
        page = client.list_runs(filters.workflow, filters.status, limit, tags=filters.tags, cursor=cursor)
    except RedflowError as exc:  # a cursor of other filters, or a stale one
        raise HttpError("400 Bad Request", f"Cannot list: {exc}") from None
    rows = (
        [run_link(base, r.id, short=True), h(r.workflow), badge(r.status), tags_html(r.tags, base), h(fmt_attempt(r)),
         when(r.created_at), h(fmt_duration(r.started_at, r.finished_at)), h(fmt_error(r.error) if r.status == "failed" else "")]
        for r in page
    )  # fmt: skip
    headers = ("run", "workflow", "status", "tags", "attempt", "created (UTC)", "duration", "error")
    html = table(headers, rows, _empty(page, cursor), wrap=(1, 3, 5))
    nav = []
    if cursor:
        nav.append(f'<a href="{h(base)}/?{h(_query(filters, limit=limit))}">&larr; newest</a>')
    if page.cursor:
        nav.append(f'<a class="next" href="{h(base)}/?{h(_query(filters, limit=limit, cursor=page.cursor))}">older runs &rarr;</a>')
    if nav:
        html += f'<p class="pager">{" ".join(nav)}</p>'
    html += _bulk_forms(actions_enabled, base, filters)
    tag_value = ", ".join(f"{k}={v}" for k, v in filters.tags.items())
    tag_input = f'<label>tag<input type="text" name="tag" placeholder="key=value" maxlength="300" value="{h(tag_value)}"></label>'
    return html, tag_input if len(filters.tags) <= 1 else _hidden_tags(filters)


def _hidden_tags(filters: Filters) -> str:
    shown = " ".join(f"{h(k)}={h(v)}" for k, v in filters.tags.items())
    hidden = "".join(f'<input type="hidden" name="tag" value="{h(k)}={h(v)}">' for k, v in filters.tags.items())
    return f'<label>tags<span class="mono">{shown}</span></label>{hidden}'


def _empty(page: Sequence[Run], cursor: str | None) -> str:
    more = getattr(page, "cursor", None)
    if more:
        return "No runs in this stretch of the index; older runs may match (next page)."
    return "No more runs match." if cursor else "No runs match."


def _bulk_forms(actions_enabled: bool, base: str, filters: Filters) -> str:
    """Retry / cancel every run the filters select (the actions that fit the status filter)."""
    forms = []
    for action, label, allowed in (("retry", "Retry all", RETRYABLE), ("cancel", "Cancel all", CANCELABLE)):
        if filters.status is not None and filters.status not in allowed:
            continue
        which = filters.status or " or ".join(allowed)
        hidden = "".join(f'<input type="hidden" name="{h(k)}" value="{h(v)}">' for k, v in _pairs(filters))
        reason = '<input type="text" name="reason" placeholder="reason (optional)" maxlength="200">' if action == "cancel" else ""
        forms.append(
            f'<form class="action bulk" method="post" action="{h(base)}/bulk/{action}">{hidden}'
            '<input type="password" name="token" placeholder="dashboard token" required autocomplete="current-password">'
            f'{reason}<label class="confirm"><input type="checkbox" name="confirm" value="yes" required> every {h(which)} run matching '
            f'<span class="mono">{h(filters.describe())}</span></label>'
            f'<button type="submit" class="{"danger" if action == "cancel" else ""}">{h(label)}</button></form>'
        )
    if not actions_enabled:
        return f'<p class="muted">{h(ACTIONS_OFF)}</p>' if forms else ""
    return f'<div class="bulk-actions"><h3>Bulk actions</h3>{"".join(forms)}</div>' if forms else ""


def _pairs(filters: Filters) -> list[tuple[str, str]]:
    pairs = [(k, v) for k, v in (("workflow", filters.workflow), ("status", filters.status)) if v]
    return pairs + [("tag", f"{k}={v}") for k, v in filters.tags.items()]


def crons_section(client: RedflowClient, actions_enabled: bool, base: str) -> str:
    """Cron triggers with their next times, paused ones marked, and pause / resume / trigger buttons."""
    rows = []
    for c in cron_entries(client):
        next_at = '<span class="badge status-canceled">paused</span>' if c.paused_at else when(c.next_at)
        first = [h(c.workflow), f"<code>{h(c.expression)}</code>", h(c.timezone or "UTC")] if c.error is None else [
            h(c.id), f'<span class="muted">unreadable: {h(c.error)}</span>', ""]  # fmt: skip
        rows.append([*first, next_at, h(c.queue if c.error is None else ""), _cron_buttons(actions_enabled, base, c.id, bool(c.paused_at))])
    return table(("workflow", "expression", "timezone", "next (UTC)", "queue", ""), rows, "No cron triggers.", wrap=(0, 2, 3))


def _cron_buttons(actions_enabled: bool, base: str, cron_id: str, paused: bool) -> str:
    """One form, two buttons (``formaction``: no script needed): pause or resume, and trigger."""
    if not actions_enabled:
        return ""
    url = f"{base}/cron/{quote(cron_id, safe='')}"
    first = "resume" if paused else "pause"
    return (
        f'<form class="action cron" method="post" action="{h(url)}/{first}">'
        '<input type="password" name="token" placeholder="token" required autocomplete="current-password">'
        f'<button type="submit" title="{h(first)} {h(cron_id)}">{first}</button>'
        f'<button type="submit" formaction="{h(url)}/trigger" title="start one run of {h(cron_id)} now">trigger</button></form>'
    )


def route(client: RedflowClient, token: bytes | None, environ: dict[str, Any], path: str, method: str) -> tuple[str, str] | None:
    """Handle this module's POST actions (``token``: the dashboard's, None when actions are off):
    the title and message of the page saying what was done; None for any other path."""
    bulk_path, cron_path = _BULK_PATH.fullmatch(path), _CRON_PATH.fullmatch(path)
    if not bulk_path and not cron_path:
        return None
    if method != "POST":
        raise HttpError("405 Method Not Allowed", "Use POST here.", [("Allow", "POST")])
    form = read_form(environ, max_fields=30)
    authorize(token, environ, form)
    if bulk_path:
        return _bulk(client, bulk_path.group(1), form)
    assert cron_path is not None
    return _cron(client, cron_path.group(1), cron_path.group(2))


def _bulk(client: RedflowClient, action: str, form: dict[str, list[str]]) -> tuple[str, str]:
    if one(form, "confirm") != "yes":
        raise HttpError("400 Bad Request", "Tick the box to confirm a bulk action.")
    filters, _ = filters_from(form)
    reason = (one(form, "reason") or "")[:200] or None
    try:
        count = bulk.apply(client, action, filters, reason)
    except RedflowError as exc:
        raise HttpError("400 Bad Request", f"Not done: {exc}") from None
    message = bulk.summary(action, filters, count)
    log.info("dashboard: bulk %s: %s", action, message)
    return f"Bulk {action}", message


def _cron(client: RedflowClient, cron_id: str, action: str) -> tuple[str, str]:
    fn = {"pause": cron.pause, "resume": cron.resume, "trigger": cron.trigger}[action]
    try:
        change = fn(client, cron_id)
    except RedflowError as exc:
        raise HttpError("404 Not Found" if "no cron trigger" in str(exc) else "400 Bad Request", str(exc)) from None
    log.info("dashboard: cron %s %s: %s", action, cron_id, change.message)
    return f"Cron {CRON_DONE[action] if change.ok else action}", f"{cron_id}: {change.message}"
