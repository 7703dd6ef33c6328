"""The dashboard's WSGI app: routing, the page frame, charts as SVG, the two actions
on one run, and :func:`serve`."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import parse_qs, urlencode

from gevent.pywsgi import WSGIServer
from redis.exceptions import RedisError

from redflow.client import RedflowClient
from redflow.core import clock
from redflow.core.errors import RedflowError
from redflow.core.keys import TERMINAL_STATUSES
from redflow.core.models import Run
from redflow.ops.control.runs import cancel_run, retry_run
from redflow.ops.dashboard import operations, schedules
from redflow.ops.dashboard.access import ACTIONS_OFF, authorize, token_bytes
from redflow.ops.dashboard.api import Api, is_api_path
from redflow.ops.dashboard.api_body import DEFAULT_MAX_BODY_BYTES
from redflow.ops.dashboard.charts import XML_PROLOG
from redflow.ops.dashboard.live import HEADERS as LIVE_HEADERS
from redflow.ops.dashboard.live import LiveStreams
from redflow.ops.dashboard.markup import h, run_url
from redflow.ops.dashboard.pages import Pages, chart_window, run_timeline
from redflow.ops.dashboard.series import CHART_NAMES, render_charts
from redflow.ops.dashboard.web import HttpError, Response, allow, one, read_form
from redflow.ops.format import fmt_time
from redflow.ops.wsgi_server import start_wsgi_server

log = logging.getLogger("redflow.dashboard")

SVG_TYPE = "image/svg+xml; charset=utf-8"

_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_SECURITY_HEADERS = [
    ("Content-Security-Policy", _CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]
_RUN_PATH = re.compile(r"/runs/([^/]{1,200})")
_TIMELINE_PATH = re.compile(r"/runs/([^/]{1,200})/timeline\.svg")
_CHART_PATH = re.compile(r"/charts/([a-z-]{1,40})\.svg")
_ACTION_PATH = re.compile(r"/runs/([^/]{1,200})/(cancel|retry)")
_LIVE_PATH = re.compile(r"/runs/([^/]{1,200})/stream")
_TEMPLATES = (
    "page.html", "message.html", "overview.html", "run.html", "workflows.html", "actions.html", "cancel.html", "retry.html",
)  # fmt: skip


def _asset(name: str) -> str:
    return resources.files("redflow.ops.dashboard").joinpath("assets", name).read_text(encoding="utf-8")


class Dashboard:
    """The WSGI app. ``token=None`` turns actions and the HTTP API off (read-only
    dashboard); ``max_body_bytes`` bounds an API request's body."""

    def __init__(self, client: RedflowClient, *, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self._token = token_bytes(token)
        self.client = client
        self.api = Api(client, self._token, max_body_bytes=max_body_bytes)
        self._templates = {name: Template(_asset(name)) for name in _TEMPLATES}
        self._css = _asset("style.css").encode()
        self._script = _asset("stream.js").encode()
        self.live = LiveStreams(client)
        self.pages = Pages(client, self._render, self._actions, actions_enabled=token is not None)

    @property
    def actions_enabled(self) -> bool:
        return self._token is not None

    # -- WSGI ------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        base = environ.get("SCRIPT_NAME", "").rstrip("/")
        try:
            live = _LIVE_PATH.fullmatch(environ.get("PATH_INFO", ""))
            if live:  # server-sent events: a body written as it comes (ops/dashboard/live.py)
                events = self.live.open(environ, live.group(1))
                start_response("200 OK", LIVE_HEADERS + _SECURITY_HEADERS)
                return events
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
        if is_api_path(path):
            return self.api(environ, base)  # JSON in and out, errors too
        done = operations.route(self.client, self._token, environ, path, method)  # bulk and cron actions
        done = done or schedules.route(self.client, self._token, environ, path, method)
        if done is not None:
            title, message = done
            return self._page(base, "200 OK", title, message)
        action = _ACTION_PATH.fullmatch(path)
        if action:
            allow(method, "POST")
            return self._action(environ, base, action.group(1), action.group(2))
        allow(method, "GET", "HEAD")
        query = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=20)
        if path == "/":
            return self._html(base, "Dashboard", self.pages.overview(base, query), nav="overview")
        if path == "/workflows":
            return self._html(base, "Workflows", self.pages.workflows(base, query), nav="workflows")
        if path == schedules.PAGE_PATH:
            return self._html(base, "Schedules", schedules.schedules_page(self.client, self.actions_enabled, base), nav="schedules")
        if path == "/static/style.css":
            return Response("200 OK", self._css, "text/css; charset=utf-8")
        if path == "/static/stream.js":
            return Response("200 OK", self._script, "text/javascript; charset=utf-8")
        chart = _CHART_PATH.fullmatch(path)
        if chart:
            return self._chart(chart.group(1), query)
        timeline = _TIMELINE_PATH.fullmatch(path)
        if timeline:
            return self._timeline(timeline.group(1))
        run = _RUN_PATH.fullmatch(path)
        if run:
            title, body = self.pages.run(base, run.group(1), query)
            return self._html(base, title, body)
        raise HttpError("404 Not Found", "No such page.")

    def _render(self, name: str, **values: Any) -> str:
        """Fill template ``name``; every value must already be HTML (escaped)."""
        return self._templates[name].substitute(values)

    def _html(self, base: str, title: str, body: str, status: str = "200 OK", nav: str = "") -> Response:
        now = fmt_time(clock.now_ms() / 1000)
        current = ' aria-current="page"'
        links = "".join(
            f'<a href="{h(base)}{href}"{current if name == nav else ""}>{h(name)}</a>'
            for name, href in (("overview", "/"), ("workflows", "/workflows"), ("schedules", schedules.PAGE_PATH))
        )
        page = self._render("page.html", title=h(title), base=h(base), prefix=h(self.client.prefix), now=h(now), nav=links, body=body)
        return Response(status, page.encode())

    def _message(self, base: str, status: str, message: str) -> Response:
        return self._html(base, status, self._render("message.html", status=h(status), message=h(message), base=h(base)), status)

    def _page(self, base: str, status: str, title: str, message: str) -> Response:
        """A page saying what an action did (``title`` and ``message`` are text)."""
        return self._html(base, title, self._render("message.html", status=h(title), message=h(message), base=h(base)), status)

    # -- SVG ------------------------------------------------------------------------
    def _chart(self, name: str, query: dict[str, list[str]]) -> Response:
        if name not in CHART_NAMES:
            raise HttpError("404 Not Found", f"No chart {name}; there are {', '.join(CHART_NAMES)}.")
        svg = render_charts(self.client, chart_window(query), (name,))[name]
        return Response("200 OK", (XML_PROLOG + svg).encode(), SVG_TYPE)

    def _timeline(self, run_id: str) -> Response:
        run = self.client.get_run(run_id)
        if run is None:
            raise HttpError("404 Not Found", f"No run {run_id}.")
        svg = run_timeline(run, self.client.get_steps(run_id), self.client.now_ms() / 1000.0)
        return Response("200 OK", (XML_PROLOG + svg).encode(), SVG_TYPE)

    # -- actions -------------------------------------------------------------------
    def _actions(self, base: str, run: Run) -> str:
        """Cancel while the run has not ended, retry once it failed or was canceled."""
        forms = ["cancel.html"] if run.status not in TERMINAL_STATUSES else ["retry.html"] if run.status != "succeeded" else []
        if not forms:
            return ""
        if not self.actions_enabled:
            return self._render("actions.html", forms=f'<p class="muted">{h(ACTIONS_OFF)}</p>')
        return self._render("actions.html", forms="".join(self._render(name, run_url=h(run_url(base, run.id))) for name in forms))

    def _action(self, environ: dict[str, Any], base: str, run_id: str, action: str) -> Response:
        form = read_form(environ)
        authorize(self._token, environ, form)
        if action == "cancel":
            result = cancel_run(self.client, run_id, (one(form, "reason") or "")[:200] or None)
            notice = "cancel-refused" if not result.ok else ("canceled" if result.status == "canceled" else "cancel-requested")
        else:
            result = retry_run(self.client, run_id)
            notice = "retried" if result.ok else "retry-refused"
        if result.status is None:
            raise HttpError("404 Not Found", f"No run {run_id}.")
        log.info("dashboard: %s %s: %s", action, run_id, result.message, extra={"run_id": run_id})
        location = f"{run_url(base, run_id)}?{urlencode({'notice': notice})}"
        return Response("303 See Other", b"", "text/plain; charset=utf-8", [("Location", location)])


def serve(
    client: RedflowClient,
    host: str = "127.0.0.1",
    port: int = 8787,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> WSGIServer:
    """Start serving the dashboard on ``host:port`` (port 0: any free port) and return the server."""
    app = Dashboard(client, token=token, max_body_bytes=max_body_bytes)
    return start_wsgi_server(app, host, port, what="the dashboard", access_log="redflow.dashboard.access", access_level=logging.INFO)
