"""The dashboard's JSON HTTP API (``/api/...``): start runs, read them, emit
events and signal runs from any language, with curl or a webhook.

Every route needs ``Authorization: Bearer <token>`` (the dashboard's token,
compared in constant time): 401 without it or with a wrong one, and 403 for
every request when the dashboard has no token (the API is off), whether or
not its pages are open. Bodies are JSON objects sent as
``application/json`` (415 otherwise), at most ``max_body_bytes`` (413),
checked field by field before anything is enqueued (400); errors are
``{"error": {"name", "message"}}``. The page is docs/operations/http-api.md.

Only the client's public API is used: ``run``, ``get_run``, ``read_stream``,
``emit_event`` and, once it exists, ``signal`` (the ``send_signal`` hook).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any
from urllib.parse import parse_qs, quote

from redis.exceptions import RedisError

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.errors import (
    InputValidationError,
    RedflowError,
    RedisFullError,
    RunNotFoundError,
    SerializationError,
    UnknownWorkflowError,
)
from redflow.core.models import Run, Unreadable
from redflow.core.streams import check_after, check_limit
from redflow.ops.dashboard.access import TOKEN_ENV
from redflow.ops.dashboard.api_body import (
    DEFAULT_MAX_BODY_BYTES,
    ApiError,
    EventRequest,
    RunRequest,
    SignalRequest,
    read_json,
)
from redflow.ops.dashboard.web import Response

log = logging.getLogger("redflow.dashboard")

JSON_TYPE = "application/json"
API_OFF = f"The HTTP API is off: start the dashboard with --token or {TOKEN_ENV}."
SIGNALS_MISSING = "Signals are not available in this version of redflow-gevent yet; nothing was sent."
#: ``client.signal(run_id, name, payload) -> bool``: False when the run is finished or unknown.
SignalSender = Callable[[str, str, Any], bool]

_RUN_PATH = re.compile(r"/api/runs/([^/]{1,200})")
_SIGNAL_PATH = re.compile(r"/api/runs/([^/]{1,200})/signal")
_STREAM_PATH = re.compile(r"/api/runs/([^/]{1,200})/stream")
_PAYLOAD_FIELDS = ("input", "output", "error", "progress")
_BEARER = "Authorization: Bearer <token>"


def is_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


class Api:
    """The ``/api`` routes of the dashboard's WSGI app.

    ``token``: the dashboard's (None: the API is off); ``send_signal``: what
    ``POST /api/runs/<id>/signal`` calls (``client.signal``), None until
    redflow has signals: then that route checks the request and the run, and
    answers 501."""

    def __init__(
        self,
        client: RedflowClient,
        token: bytes | None,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        send_signal: SignalSender | None = None,
    ) -> None:
        if max_body_bytes < 1:
            raise RedflowError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
        self.client = client
        self._token = token
        self.max_body_bytes = max_body_bytes
        self.send_signal = send_signal

    def __call__(self, environ: dict[str, Any], base: str) -> Response:
        """The response to one request under ``/api``; errors become JSON, never a page."""
        try:
            return self._route(environ, base)
        except ApiError as exc:
            return error_response(exc.status, exc.name, exc.message, exc.headers)
        except UnknownWorkflowError as exc:
            return error_response("404 Not Found", exc.name, str(exc))
        except InputValidationError as exc:
            return error_response("400 Bad Request", exc.name, str(exc))
        except RedisFullError as exc:
            return error_response("503 Service Unavailable", exc.name, str(exc))
        except RedisError as exc:
            log.warning("dashboard API: Redis unavailable: %s", exc)
            return error_response("503 Service Unavailable", "RedisUnavailable", "Redis is unavailable; try again shortly.")
        except RedflowError as exc:  # corrupt data in Redis, named by the error
            log.warning("dashboard API: %s", exc)
            return error_response("500 Internal Server Error", exc.name, str(exc))

    def _route(self, environ: dict[str, Any], base: str) -> Response:
        self._authorize(environ)
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/api/runs":
            _allow(method, "POST")
            return self._create_run(environ, base)
        if path == "/api/events":
            _allow(method, "POST")
            return self._emit(environ)
        signal = _SIGNAL_PATH.fullmatch(path)
        if signal:
            _allow(method, "POST")
            return self._signal(environ, signal.group(1))
        stream = _STREAM_PATH.fullmatch(path)
        if stream:
            _allow(method, "GET")
            return self._read_stream(environ, stream.group(1))
        run = _RUN_PATH.fullmatch(path)
        if run:
            _allow(method, "GET")
            return self._get_run(run.group(1))
        raise ApiError("404 Not Found", "NotFound", "No such API route.")

    def _authorize(self, environ: dict[str, Any]) -> None:
        """403 when the API is off; 401 unless ``Authorization: Bearer`` carries the token."""
        if self._token is None:
            raise ApiError("403 Forbidden", "ApiOff", API_OFF)
        scheme, _, given = str(environ.get("HTTP_AUTHORIZATION", "")).strip().partition(" ")
        # WSGI gives header values as latin-1 text: back to the bytes that were sent.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("latin-1", "replace"), self._token):
            message = "Wrong dashboard token." if scheme.lower() == "bearer" else f"Send the dashboard token as {_BEARER}."
            raise ApiError("401 Unauthorized", "Unauthorized", message, [("WWW-Authenticate", 'Bearer realm="redflow"')])

    # -- routes ---------------------------------------------------------------------
    def _create_run(self, environ: dict[str, Any], base: str) -> Response:
        """201 ``{"id", "status"}``; a repeated ``idempotency_key`` answers 201 with the run it names."""
        request = RunRequest.parse(read_json(environ, self.max_body_bytes))
        handle = self.client.run(
            request.workflow, request.input, delay=request.delay_s, priority=request.priority, tags=request.tags,
            idempotency_key=request.idempotency_key,
        )  # fmt: skip
        location = f"{base}/api/runs/{quote(handle.id, safe='')}"
        return json_response("201 Created", {"id": handle.id, "status": handle.status()}, [("Location", location)])

    def _get_run(self, run_id: str) -> Response:
        run = self.client.get_run(run_id)
        if run is None:
            raise ApiError("404 Not Found", "RunNotFoundError", f"No run {run_id}.")
        return Response("200 OK", run_json(run), JSON_TYPE)

    def _read_stream(self, environ: dict[str, Any], run_id: str) -> Response:
        """200 ``{"items": [{"id", "attempt", "at", "value"}], "next"}`` (``?after=&limit=``, as
        ``client.read_stream``; ``next``: the id to pass as ``after`` for more); 404, or 400 for a bad query."""
        try:
            query = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=10)
            after, limit = query.get("after", [None])[0], query.get("limit", ["100"])[0]
            after, limit = check_after(after), check_limit(int(limit) if limit.isdigit() else limit)
        except (RedflowError, ValueError) as exc:  # a bad after= or limit= (or too many fields)
            raise ApiError("400 Bad Request", "InvalidQuery", str(exc)) from None
        try:
            items = self.client.read_stream(run_id, after=after, limit=limit)
        except RunNotFoundError as exc:
            raise ApiError("404 Not Found", exc.name, str(exc)) from None
        page = [{"id": item.id, "attempt": item.attempt, "at": item.written_at, "value": item.value} for item in items]
        return json_response("200 OK", {"items": page, "next": items[-1].id if items else after})

    def _emit(self, environ: dict[str, Any]) -> Response:
        """202 ``{"event", "run_ids"}``: the runs the event started (its waiting runs are resumed too)."""
        request = EventRequest.parse(read_json(environ, self.max_body_bytes))
        run_ids = self.client.emit_event(request.event, request.payload, idempotency_key=request.idempotency_key)
        return json_response("202 Accepted", {"event": request.event, "run_ids": run_ids})

    def _signal(self, environ: dict[str, Any], run_id: str) -> Response:
        """202 ``{"id", "signal"}``; 404 for an unknown run, 409 for a finished one, 501 until signals exist."""
        request = SignalRequest.parse(read_json(environ, self.max_body_bytes))
        self._signalable(run_id)
        if self.send_signal is None:
            raise ApiError("501 Not Implemented", "NotImplemented", SIGNALS_MISSING)
        if not self.send_signal(run_id, request.name, request.payload):
            self._signalable(run_id)  # it ended (or was purged) in between: say which
        return json_response("202 Accepted", {"id": run_id, "signal": request.name})

    def _signalable(self, run_id: str) -> None:
        run = self.client.get_run(run_id)
        if run is None:
            raise ApiError("404 Not Found", "RunNotFoundError", f"No run {run_id}.")
        if run.is_terminal:
            raise ApiError("409 Conflict", "RunFinished", f"Run {run_id} has ended ({run.status}); it takes no signal.")


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise ApiError("405 Method Not Allowed", "MethodNotAllowed", f"Use {allowed} here.", [("Allow", allowed)])


def run_json(run: Run) -> bytes:
    """A run as the API gives it: every field of :class:`Run` (times in unix
    seconds); a payload stored in a form that does not decode is
    ``{"raw", "reason"}``, one nested too deep to encode is ``{"raw": null, "reason"}``."""
    record: dict[str, Any] = {f.name: getattr(run, f.name) for f in fields(run)}
    for name in _PAYLOAD_FIELDS:
        value = record[name]
        if isinstance(value, Unreadable):
            record[name] = {"raw": value.raw, "reason": value.reason}
    try:
        return codec.dumps(record).encode()
    except SerializationError:  # a payload decodes (1,024 levels) but does not encode (254)
        for name in _PAYLOAD_FIELDS:
            try:
                codec.dumps(record[name])
            except SerializationError as exc:
                record[name] = {"raw": None, "reason": str(exc)}
        return codec.dumps(record).encode()


def json_response(status: str, value: Any, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return Response(status, codec.dumps(value).encode(), JSON_TYPE, list(headers))


def error_response(status: str, name: str, message: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    return json_response(status, {"error": {"name": name, "message": message}}, headers)
