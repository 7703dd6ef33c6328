"""JSON in and out of Redis, with orjson only.

Compact UTF-8 JSON, as the TypeScript client writes it. Nothing here can
build arbitrary objects from a payload: a queue must never be a way to run
code on a worker (no pickle, no eval).
"""

from __future__ import annotations

from typing import Any

import orjson

from redflow.core.errors import CorruptDataError, SerializationError, error_to_json

#: How the TypeScript client spells ``undefined``; it reads back as ``None``.
UNDEFINED_TOKEN = "__redflow_undefined_raw__:v1"

_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str:
    """Encode ``value`` as compact JSON text; :class:`SerializationError` if it can't be."""
    try:
        return orjson.dumps(value, option=_DUMPS_OPTIONS).decode()
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise SerializationError(f"Value is not JSON-serializable: {exc}") from exc


def loads(raw: str | bytes | None, *, what: str = "value") -> Any:
    """Decode JSON read from Redis; :class:`CorruptDataError` naming ``what`` if it is not JSON."""
    if raw is None:
        raise CorruptDataError(f"{what} is missing")
    if raw == UNDEFINED_TOKEN:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        preview = raw[:80] if isinstance(raw, (str, bytes)) else raw
        raise CorruptDataError(f"{what} is not valid JSON ({exc}): {preview!r}") from exc


def dumps_error(err: BaseException, *, with_stack: bool = True) -> str:
    """The ``errorJson`` text of ``err``; an error whose message is not text still gets one."""
    try:
        return dumps(error_to_json(err, with_stack=with_stack))
    except SerializationError:
        return dumps({"name": type(err).__name__, "message": repr(err), "kind": "error"})


def try_loads(raw: str | bytes | None) -> Any:
    """Like :func:`loads` but ``None`` for missing or malformed data (cached, optional fields)."""
    if raw is None or raw == "":
        return None
    try:
        return loads(raw)
    except CorruptDataError:
        return None
