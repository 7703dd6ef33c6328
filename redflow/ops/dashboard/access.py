"""Who may act on the dashboard: the holder of its token.

Actions are POST only and need the token given by ``--token`` or
``REDFLOW_DASHBOARD_TOKEN``, compared in constant time; with no token
configured every action is refused. The token travels in the form body (or
an ``Authorization: Bearer`` header), never in a cookie, so another site
cannot make a browser act on its behalf.
"""

from __future__ import annotations

import hmac
from typing import Any

from redflow.core.errors import RedflowError
from redflow.ops.dashboard.web import HttpError, one
from redflow.store.connection import DASHBOARD_TOKEN_ENV, resolve_dashboard_token

TOKEN_ENV = DASHBOARD_TOKEN_ENV
MIN_TOKEN_CHARS = 12
ACTIONS_OFF = f"Actions are off: start the dashboard with --token or {TOKEN_ENV}."


def resolve_token(flag: str | None) -> str | None:
    """``--token`` wins, else ``REDFLOW_DASHBOARD_TOKEN``; ``None`` means actions are off."""
    return resolve_dashboard_token(flag)


def token_bytes(token: str | None) -> bytes | None:
    """The token to compare requests with; one too short to be safe is refused."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise RedflowError(f"the dashboard token must have at least {MIN_TOKEN_CHARS} characters")
    return token.encode() if token is not None else None


def authorize(token: bytes | None, environ: dict[str, Any], form: dict[str, list[str]]) -> None:
    """403 unless the form or the Authorization header carries ``token`` (always, when it is None)."""
    if token is None:
        raise HttpError("403 Forbidden", ACTIONS_OFF)
    given = one(form, "token")
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if given is None and auth.startswith("Bearer "):
        given = auth[len("Bearer ") :]
    if not given or not hmac.compare_digest(given.encode(), token):
        raise HttpError("403 Forbidden", "Wrong or missing dashboard token.")
