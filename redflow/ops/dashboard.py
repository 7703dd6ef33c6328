"""A small web dashboard: ``redflow-gevent dashboard --port 8787``.

A plain WSGI app served by gevent's WSGI server: queues, runs by status,
recent runs filterable by workflow and status, one run's steps with outputs
and errors, cron triggers with their next times, and cancel / retry buttons.

Read-only pages are meant to be safe to expose: every value is HTML-escaped,
no script runs in the page (a strict Content-Security-Policy says so), and
neither the Redis URL nor the token is ever shown. Actions are POST only and
need the token given by ``--token`` or ``REDFLOW_DASHBOARD_TOKEN``, compared
in constant time; with no token configured every action is refused. The
token travels in the form body (or an ``Authorization: Bearer`` header),
never in a cookie, so another site cannot make a browser act on its behalf.
"""

from __future__ import annotations

import argparse
import hmac
import html
import logging
import re
import signal
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import gevent
from gevent.pywsgi import LoggingLogAdapter, WSGIServer
from redis.exceptions import RedisError

from redflow.client import RedflowClient
from redflow.core import clock
from redflow.core.errors import RedflowError
from redflow.core.keys import RUN_STATUSES, TERMINAL_STATUSES
from redflow.core.models import Run, Step
from redflow.ops.admin import (
    cancel_run,
    connect,
    connection_options,
    cron_entries,
    describe_wait,
    fmt_attempt,
    fmt_duration,
    fmt_error,
    fmt_step_outcome,
    fmt_time,
    preview,
    queue_counts,
    retry_run,
    workflow_names,
)
from redflow.ops.shown import shown_json
from redflow.store.connection import DASHBOARD_TOKEN_ENV, resolve_dashboard_token

log = logging.getLogger("redflow.dashboard")

TOKEN_ENV = DASHBOARD_TOKEN_ENV
MIN_TOKEN_CHARS = 12
ACTIONS_OFF = f"Actions are off: start the dashboard with --token or {TOKEN_ENV}."
MAX_BODY_BYTES = 8192
MAX_LIMIT = 500
DEFAULT_LIMIT = 50
SHOWN_JSON_CHARS = 20_000

_CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
_SECURITY_HEADERS = [
    ("Content-Security-Policy", _CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]
_RUN_PATH = re.compile(r"/runs/([^/]{1,200})")
_ACTION_PATH = re.compile(r"/runs/([^/]{1,200})/(cancel|retry)")
#: What the run page says after an action (a fixed set: nothing from the request is echoed).
NOTICES = {
    "canceled": "Run canceled.",
    "cancel-requested": "Cancel requested: its worker stops the run.",
    "cancel-refused": "Not canceled: the run already ended.",
    "retried": "Queued again; its succeeded steps will replay.",
    "retry-refused": "Not retried: only failed or canceled runs can be retried.",
}
_TEMPLATES = ("page.html", "message.html", "overview.html", "run.html", "actions.html", "cancel.html", "retry.html")


def _asset(name: str) -> str:
    return resources.files("redflow.ops").joinpath("dashboard_assets", name).read_text(encoding="utf-8")


def h(value: Any) -> str:
    """Escape anything for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def pretty(value: Any) -> str:
    """Indented JSON for a run page, bounded; never fails (see :mod:`redflow.ops.shown`)."""
    return shown_json(value, SHOWN_JSON_CHARS, indent=True)


def badge(status: str) -> str:
    return f'<span class="badge status-{h(status)}">{h(status)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str, numeric: Sequence[int] = ()) -> str:
    """An HTML table; ``rows`` hold cells that are already HTML (escaped)."""
    rows = list(rows)
    if not rows:
        return f'<p class="empty">{h(empty)}</p>'

    def cls(i: int) -> str:
        return ' class="num"' if i in numeric else ""

    head = "".join(f"<th{cls(i)}>{h(name)}</th>" for i, name in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class HttpError(Exception):
    """Ends a request with ``status`` and a short message page."""

    def __init__(self, status: str, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = list(headers)


@dataclass
class Response:
    status: str
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def resolve_token(flag: str | None) -> str | None:
    """``--token`` wins, else ``REDFLOW_DASHBOARD_TOKEN``; ``None`` means actions are off."""
    return resolve_dashboard_token(flag)


class Dashboard:
    """The WSGI app. ``token=None`` turns actions off (read-only dashboard)."""

    def __init__(self, client: RedflowClient, *, token: str | None = None) -> None:
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise RedflowError(f"the dashboard token must have at least {MIN_TOKEN_CHARS} characters")
        self.client = client
        self._token = token.encode() if token is not None else None
        self._templates = {name: Template(_asset(name)) for name in _TEMPLATES}
        self._css = _asset("style.css").encode()

    @property
    def actions_enabled(self) -> bool:
        return self._token is not None

    # -- WSGI ------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        base = environ.get("SCRIPT_NAME", "").rstrip("/")
        try:
            response = self._route(environ, base)
        except HttpError as exc:
            response = self._message(base, exc.status, exc.message)
            response.headers += exc.headers
        except RedisError as exc:
            log.warning("dashboard: Redis unavailable: %s", exc)
            response = self._message(base, "503 Service Unavailable", "Redis is unavailable; try again shortly.")
        except RedflowError as exc:  # corrupt data in Redis, named by the error
            response = self._message(base, "500 Internal Server Error", f"Cannot show this: {exc}")
        headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body)))]
        start_response(response.status, headers + _SECURITY_HEADERS + response.headers)
        return [response.body]

    def _route(self, environ: dict[str, Any], base: str) -> Response:
        path = environ.get("PATH_INFO", "") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        action = _ACTION_PATH.fullmatch(path)
        if action:
            _allow(method, "POST")
            return self._action(environ, base, action.group(1), action.group(2))
        _allow(method, "GET", "HEAD")
        query = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=20)
        if path == "/":
            return self._overview(base, query)
        if path == "/static/style.css":
            return Response("200 OK", self._css, "text/css; charset=utf-8")
        run = _RUN_PATH.fullmatch(path)
        if run:
            return self._run_page(base, run.group(1), query)
        raise HttpError("404 Not Found", "No such page.")

    def _render(self, name: str, **values: Any) -> str:
        """Fill template ``name``; every value must already be HTML (escaped)."""
        return self._templates[name].substitute(values)

    def _html(self, base: str, title: str, body: str, status: str = "200 OK") -> Response:
        now = fmt_time(clock.now_ms() / 1000)
        page = self._render("page.html", title=h(title), base=h(base), prefix=h(self.client.prefix), now=h(now), body=body)
        return Response(status, page.encode())

    def _message(self, base: str, status: str, message: str) -> Response:
        return self._html(base, status, self._render("message.html", status=h(status), message=h(message), base=h(base)), status)

    # -- pages -------------------------------------------------------------------
    def _overview(self, base: str, query: dict[str, list[str]]) -> Response:
        workflow, status, limit = _filters(query)
        client = self.client
        names = workflow_names(client)
        counts = "".join(f'<a href="{h(base)}/?status={h(s)}">{badge(s)} {h(n)}</a>' for s, n in client.status_counts().items())
        queues = table(
            ("queue", "ready", "processing", "scheduled"),
            ([h(q.queue), h(q.ready), h(q.processing), h(q.scheduled)] for q in queue_counts(client)),
            "No queues yet: no worker has synced a workflow.",
            numeric=(1, 2, 3),
        )
        crons = table(
            ("workflow", "expression", "timezone", "next (UTC)", "queue"),
            (
                [h(c.workflow), f"<code>{h(c.expression)}</code>", h(c.timezone or "UTC"), h(fmt_time(c.next_at)), h(c.queue)]
                if c.error is None
                else [h(c.id), f'<span class="muted">unreadable: {h(c.error)}</span>', "", h(fmt_time(c.next_at)), ""]
                for c in cron_entries(client)
            ),
            "No cron triggers.",
        )
        runs = table(
            ("run", "workflow", "status", "attempt", "created (UTC)", "duration", "error"),
            (
                [_run_link(base, r.id), h(r.workflow), badge(r.status), h(fmt_attempt(r)), h(fmt_time(r.created_at)),
                 h(fmt_duration(r.started_at, r.finished_at)), h(fmt_error(r.error) if r.status == "failed" else "")]
                for r in client.list_runs(workflow=workflow, status=status, limit=limit)
            ),
            "No runs match.",
        )  # fmt: skip
        body = self._render(
            "overview.html", base=h(base), queues=queues, crons=crons, counts=counts, runs=runs, max_limit=MAX_LIMIT, limit=limit,
            workflow_options=_options(names + ([workflow] if workflow and workflow not in names else []), workflow),
            status_options=_options(RUN_STATUSES, status),
        )  # fmt: skip
        return self._html(base, "Dashboard", body)

    def _run_page(self, base: str, run_id: str, query: dict[str, list[str]]) -> Response:
        run = self.client.get_run(run_id)
        if run is None:
            raise HttpError("404 Not Found", f"No run {run_id}.")
        steps = self.client.get_steps(run_id)
        notice = NOTICES.get(_one(query, "notice") or "")
        facts = [
            ("workflow", h(run.workflow)), ("queue", h(run.queue)), ("attempt", h(fmt_attempt(run))),
            ("created", h(fmt_time(run.created_at))), ("started", h(fmt_time(run.started_at))),
            ("finished", h(fmt_time(run.finished_at))), ("duration", h(fmt_duration(run.started_at, run.finished_at))),
            ("parent", _run_link(base, run.parent_run_id) if run.parent_run_id else "-"),
            ("cancel", h(run.cancel_reason or ("requested" if run.cancel_requested_at else "-"))),
        ]  # fmt: skip
        if run.status == "scheduled" and run.parked_for:
            facts.append(("waiting", h(describe_wait(run, steps))))
        if run.progress is not None:
            facts.append(("progress", f"<code>{h(preview(run.progress, 300))}</code>"))
        outcome = ""
        if run.status == "succeeded":
            outcome = f"<section><h2>Output</h2><pre>{h(pretty(run.output))}</pre></section>"
        elif run.error:
            outcome = f"<section><h2>Error</h2>{_error_html(run.error)}</section>"
        body = self._render(
            "run.html", base=h(base), id=h(run.id), badge=badge(run.status), input=h(pretty(run.input)), outcome=outcome,
            notice=f'<div class="notice">{h(notice)}</div>' if notice else "",
            facts="".join(f"<dt>{h(k)}</dt><dd>{v}</dd>" for k, v in facts),
            actions=self._actions(base, run), steps=_steps_table(steps),
        )  # fmt: skip
        return self._html(base, run.id, body)

    def _actions(self, base: str, run: Run) -> str:
        """Cancel while the run has not ended, retry once it failed or was canceled."""
        forms = ["cancel.html"] if run.status not in TERMINAL_STATUSES else ["retry.html"] if run.status != "succeeded" else []
        if not forms:
            return ""
        if not self.actions_enabled:
            return self._render("actions.html", forms=f'<p class="muted">{h(ACTIONS_OFF)}</p>')
        return self._render("actions.html", forms="".join(self._render(name, run_url=h(_run_url(base, run.id))) for name in forms))

    # -- actions -------------------------------------------------------------------
    def _action(self, environ: dict[str, Any], base: str, run_id: str, action: str) -> Response:
        form = _read_form(environ)
        self._authorize(environ, form)
        if action == "cancel":
            result = cancel_run(self.client, run_id, (_one(form, "reason") or "")[:200] or None)
            notice = "cancel-refused" if not result.ok else ("canceled" if result.status == "canceled" else "cancel-requested")
        else:
            result = retry_run(self.client, run_id)
            notice = "retried" if result.ok else "retry-refused"
        if result.status is None:
            raise HttpError("404 Not Found", f"No run {run_id}.")
        log.info("dashboard: %s %s: %s", action, run_id, result.message, extra={"run_id": run_id})
        location = f"{_run_url(base, run_id)}?{urlencode({'notice': notice})}"
        return Response("303 See Other", b"", "text/plain; charset=utf-8", [("Location", location)])

    def _authorize(self, environ: dict[str, Any], form: dict[str, list[str]]) -> None:
        if self._token is None:
            raise HttpError("403 Forbidden", ACTIONS_OFF)
        given = _one(form, "token")
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if given is None and auth.startswith("Bearer "):
            given = auth[len("Bearer ") :]
        if not given or not hmac.compare_digest(given.encode(), self._token):
            raise HttpError("403 Forbidden", "Wrong or missing dashboard token.")


def _allow(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise HttpError("405 Method Not Allowed", f"Use {' or '.join(allowed)} here.", [("Allow", ", ".join(allowed))])


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _filters(query: dict[str, list[str]]) -> tuple[str | None, str | None, int]:
    """Workflow, status and limit from the query string; 400 on a bad one."""
    workflow = _one(query, "workflow") or None
    status = _one(query, "status") or None
    if workflow is not None and len(workflow) > 200:
        raise HttpError("400 Bad Request", "The workflow name is too long.")
    if status is not None and status not in RUN_STATUSES:
        raise HttpError("400 Bad Request", f"Unknown status; use one of {', '.join(RUN_STATUSES)}.")
    raw_limit = _one(query, "limit") or str(DEFAULT_LIMIT)
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise HttpError("400 Bad Request", f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    return workflow, status, int(raw_limit)


def _read_form(environ: dict[str, Any]) -> dict[str, list[str]]:
    raw_length = environ.get("CONTENT_LENGTH") or "0"
    if not raw_length.isdigit():
        raise HttpError("400 Bad Request", "Bad Content-Length.")
    if int(raw_length) > MAX_BODY_BYTES:
        raise HttpError("413 Content Too Large", "The form is too large.")
    body = environ["wsgi.input"].read(int(raw_length)) if int(raw_length) else b""
    try:
        return parse_qs(body.decode("utf-8"), max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        raise HttpError("400 Bad Request", "The form is not valid.") from None


def _run_url(base: str, run_id: str) -> str:
    return f"{base}/runs/{quote(run_id, safe='')}"


def _run_link(base: str, run_id: str) -> str:
    return f'<a class="mono" href="{h(_run_url(base, run_id))}">{h(run_id)}</a>'


def _options(values: Iterable[str], chosen: str | None) -> str:
    """``<option>``s of a filter, "all" first."""
    items = ['<option value="">all</option>']
    items += [f'<option value="{h(v)}"{" selected" if v == chosen else ""}>{h(v)}</option>' for v in values]
    return "".join(items)


def _error_html(error: dict[str, Any]) -> str:
    stack = error.get("stack")
    details = f"<details><summary>stack</summary><pre>{h(stack)}</pre></details>" if stack else ""
    return f"<pre>{h(fmt_error(error))}</pre>{details}"


def _steps_table(steps: Sequence[Step]) -> str:
    rows = (
        [
            h(s.seq),
            f"<code>{h(s.name)}</code>",
            badge(s.status),
            h(fmt_time(s.started_at)),
            h(fmt_duration(s.started_at, s.finished_at)),
            _error_html(s.error) if s.error else f"<code>{h(fmt_step_outcome(s, 300))}</code>",
        ]
        for s in steps
    )
    return table(("seq", "step", "status", "started (UTC)", "duration", "output / error"), rows, "No steps yet.", numeric=(0,))


# -- serving ------------------------------------------------------------------------


def start_wsgi_server(app: Any, host: str, port: int, *, what: str, access_log: str, access_level: int) -> WSGIServer:
    """Bind ``host:port`` (port 0: any free port) and serve ``app`` on gevent's WSGI server.

    Binding here rather than in gevent keeps a port in use a clean
    :class:`RedflowError` (gevent leaks the socket it failed to bind)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listener = socket.socket(family, kind, proto)
    except OSError as exc:
        raise RedflowError(f"cannot serve {what} on {host}:{port}: {exc}") from exc
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise RedflowError(f"cannot serve {what} on {host}:{port}: {exc}") from exc
    access = LoggingLogAdapter(logging.getLogger(access_log), access_level)
    server = WSGIServer(listener, app, log=access, error_log=logging.getLogger(access_log))
    server.start()
    return server


def serve(client: RedflowClient, host: str = "127.0.0.1", port: int = 8787, *, token: str | None = None) -> WSGIServer:
    """Start serving the dashboard on ``host:port`` (port 0: any free port) and return the server."""
    app = Dashboard(client, token=token)
    return start_wsgi_server(app, host, port, what="the dashboard", access_log="redflow.dashboard.access", access_level=logging.INFO)


def _dashboard_command(args: argparse.Namespace) -> int:
    try:
        token = resolve_token(args.token)
        client = connect(args)
        server = serve(client, args.host, args.port, token=token)
    except (RedflowError, ValueError) as exc:
        raise SystemExit(f"dashboard: {exc}") from None
    log.info("dashboard on http://%s:%d/ (actions %s)", args.host, server.server_port, "on" if token else "off: no token")
    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, lambda: gevent.spawn(server.stop, 2))
    server.serve_forever()
    client.close()
    return 0


def register(subparsers: Any) -> None:
    """Add ``dashboard``."""
    parser = subparsers.add_parser("dashboard", help="serve the web dashboard")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8787, help="default 8787")
    parser.add_argument("--token", default=None, help=f"enables cancel/retry (prefer ${TOKEN_ENV}: flags show in ps)")
    connection_options(parser)
    parser.set_defaults(func=_dashboard_command)
