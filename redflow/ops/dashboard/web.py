"""The request and response values every dashboard handler shares: the error
that ends a request with a status, the response, a query value, a bounded
POSTed form, and the allowed methods of a path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

MAX_BODY_BYTES = 8192


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


def one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def allow(method: str, *allowed: str) -> None:
    """405 unless ``method`` is one of ``allowed``."""
    if method not in allowed:
        raise HttpError("405 Method Not Allowed", f"Use {' or '.join(allowed)} here.", [("Allow", ", ".join(allowed))])


def read_form(environ: dict[str, Any], max_fields: int = 10) -> dict[str, list[str]]:
    """The POSTed form, bounded (size and ``max_fields``); 400 / 413 on a bad one."""
    raw_length = environ.get("CONTENT_LENGTH") or "0"
    if not raw_length.isdigit():
        raise HttpError("400 Bad Request", "Bad Content-Length.")
    if int(raw_length) > MAX_BODY_BYTES:
        raise HttpError("413 Content Too Large", "The form is too large.")
    body = environ["wsgi.input"].read(int(raw_length)) if int(raw_length) else b""
    try:
        return parse_qs(body.decode("utf-8"), max_num_fields=max_fields)
    except (UnicodeDecodeError, ValueError):
        raise HttpError("400 Bad Request", "The form is not valid.") from None
