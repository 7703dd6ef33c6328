"""The HTTP API's request bodies: read bounded, parsed as JSON, and checked
field by field before anything is enqueued, so that a bad request gets a 4xx
naming what is wrong and never creates a run.

Nothing here touches Redis; :mod:`redflow.ops.dashboard.api` routes and acts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from redflow.core.errors import RedflowError
from redflow.core.flow import check_priority
from redflow.core.signals import check_signal_name
from redflow.core.tags import validate_tags
from redflow.ops.dashboard.web import HttpError

#: The default bound on a request body (``Dashboard(max_body_bytes=...)``).
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
#: The longest ``delay`` a run may be given: ten years.
MAX_DELAY_S = 10 * 365 * 86400.0
_READ_CHUNK_BYTES = 64 * 1024


class ApiError(HttpError):
    """Ends an API request with ``status`` and ``{"error": {"name", "message"}}``."""

    def __init__(self, status: str, name: str, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(status, message, headers)
        self.name = name


def invalid(message: str) -> ApiError:
    return ApiError("400 Bad Request", "InvalidField", message)


def read_json(environ: Mapping[str, Any], max_body_bytes: int) -> dict[str, Any]:
    """The body as a JSON object: 415 unless it is sent as JSON, 413 past
    ``max_body_bytes`` (by Content-Length before reading anything, else while
    reading a chunked body), 400 unless it parses to an object."""
    media_type = str(environ.get("CONTENT_TYPE", "")).partition(";")[0].strip().lower()
    if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
        raise ApiError("415 Unsupported Media Type", "UnsupportedMediaType", "Send the body as JSON, with Content-Type: application/json.")
    body = _read_bounded(environ, max_body_bytes)
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError("400 Bad Request", "InvalidJSON", f"The body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ApiError("400 Bad Request", "InvalidJSON", f"The body must be a JSON object, got {_json_type(value)}.")
    return value


def _too_large(max_body_bytes: int) -> ApiError:
    # Connection: close, so that the client stops sending instead of the server draining the rest.
    message = f"The body is over the limit of {max_body_bytes:,} bytes."
    return ApiError("413 Content Too Large", "ContentTooLarge", message, [("Connection", "close")])


def _read_bounded(environ: Mapping[str, Any], max_body_bytes: int) -> bytes:
    raw_length = str(environ.get("CONTENT_LENGTH") or "").strip()
    stream = environ["wsgi.input"]
    if raw_length:
        if not raw_length.isdigit():
            raise ApiError("400 Bad Request", "InvalidRequest", "Bad Content-Length.")
        if int(raw_length) > max_body_bytes:
            raise _too_large(max_body_bytes)
        return bytes(stream.read(int(raw_length)))
    # No Content-Length (chunked): read at most one byte past the limit.
    chunks: list[bytes] = []
    received = 0
    while received <= max_body_bytes:
        chunk = stream.read(min(_READ_CHUNK_BYTES, max_body_bytes + 1 - received))
        if not chunk:
            break
        chunks.append(chunk)
        received += len(chunk)
    if received > max_body_bytes:
        raise _too_large(max_body_bytes)
    return b"".join(chunks)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _only(body: Mapping[str, Any], required: Sequence[str], optional: Sequence[str]) -> None:
    """400 naming the first missing field and every unknown one (a typo must not be ignored)."""
    missing = [name for name in required if name not in body]
    if missing:
        raise invalid(f"{missing[0]!r} is required.")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        raise invalid(f"Unknown field(s): {', '.join(map(repr, unknown))}; the fields are {', '.join([*required, *optional])}.")


def _text(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise invalid(f"{name!r} must be a non-empty string, got {_json_type(value)}.")
    return value


def _required_text(body: Mapping[str, Any], name: str) -> str:
    value = _text(body, name)
    if value is None:
        raise invalid(f"{name!r} must be a non-empty string, got null.")
    return value


@dataclass(frozen=True, slots=True)
class RunRequest:
    """``POST /api/runs``: what ``client.run`` is given."""

    workflow: str
    input: Any
    delay_s: float | None
    priority: int
    tags: dict[str, str]
    idempotency_key: str | None

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> RunRequest:
        _only(body, ("workflow",), ("input", "delay", "priority", "tags", "idempotency_key"))
        return cls(
            workflow=_required_text(body, "workflow"),
            input=body.get("input"),
            delay_s=_delay(body.get("delay")),
            priority=_priority(body.get("priority")),
            tags=_tags(body.get("tags")),
            idempotency_key=_text(body, "idempotency_key"),
        )


def _delay(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= MAX_DELAY_S:
        raise invalid(f"'delay' must be a number of seconds from 0 to {MAX_DELAY_S:.0f}, got {value!r}.")
    return float(value)


def _priority(value: Any) -> int:
    if value is None:
        return 0
    try:
        return check_priority(value)
    except RedflowError as exc:
        raise invalid(f"'priority': {exc}.") from None


def _tags(value: Any) -> dict[str, str]:
    try:
        return validate_tags(value)
    except RedflowError as exc:  # InputValidationError: about the request, not the workflow's input
        raise invalid(f"'tags': {exc}.") from None


@dataclass(frozen=True, slots=True)
class EventRequest:
    """``POST /api/events``: what ``client.emit_event`` is given."""

    event: str
    payload: Any
    idempotency_key: str | None

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> EventRequest:
        _only(body, ("event",), ("payload", "idempotency_key"))
        return cls(_required_text(body, "event"), body.get("payload"), _text(body, "idempotency_key"))


@dataclass(frozen=True, slots=True)
class SignalRequest:
    """``POST /api/runs/<id>/signal``: what ``client.signal`` is given."""

    name: str
    payload: Any

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> SignalRequest:
        _only(body, ("name",), ("payload",))
        try:
            name = check_signal_name(_required_text(body, "name"))
        except RedflowError as exc:
            raise invalid(f"'name': {exc}.") from None
        return cls(name, body.get("payload"))
