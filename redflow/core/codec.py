"""JSON in and out of Redis, with orjson only.

Compact UTF-8 JSON, as the TypeScript client writes it. Nothing here can
build arbitrary objects from a payload: a queue must never be a way to run
code on a worker (no pickle, no eval).

What JSON cannot hold is refused rather than converted into something the
handler would get back as another type (docs/guide/values.md, "Values and JSON"
table): datetimes and dataclasses are refused through orjson's passthrough
options, at no cost to the hot path; the few conversions orjson always makes
(UUID to its string, an enum to its value, a tuple to an array, NaN to
null) are kept and documented. The path of the offending value is only
looked for once encoding has failed.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from typing import Any

import orjson

from redflow.core.errors import CorruptDataError, SerializationError, error_to_json

#: How the TypeScript client spells ``undefined``; it reads back as ``None``.
UNDEFINED_TOKEN = "__redflow_undefined_raw__:v1"

#: Non-str keys (int, float, bool, None) become strings, as with the json module;
#: datetimes and dataclasses go to the (absent) ``default`` and so are refused.
_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
#: orjson encodes at most this many levels of nested containers.
MAX_DEPTH = 254


def dumps(value: Any, *, what: str = "value") -> str:
    """Encode ``value`` as compact JSON text; :class:`SerializationError` naming
    the path of the offending part (``input["items"][3]``, rooted at ``what``) if it can't be."""
    try:
        return orjson.dumps(value, option=_DUMPS_OPTIONS).decode()
    except orjson.JSONEncodeError:
        raise SerializationError(_offender(value, what)) from None


def _encodes(value: Any) -> bool:
    try:
        orjson.dumps(value, option=_DUMPS_OPTIONS)
    except orjson.JSONEncodeError:
        return False
    return True


def _offender(value: Any, root: str) -> str:
    """Why the part of ``value`` that JSON refuses is refused, with its path.
    Called only after encoding failed, so the hot path never pays for it."""
    path: list[str] = []
    while len(path) <= MAX_DEPTH:
        if isinstance(value, dict):
            bad_key = next((key for key in value if not _encodes({key: None})), _NO_KEY)
            if bad_key is not _NO_KEY:
                return f"{_path(root, path)} has a key of type {type(bad_key).__name__} ({_short(bad_key)}): JSON keys are strings"
            children = [(f"[{_key(key)}]", item) for key, item in value.items()]
        elif isinstance(value, list) or type(value) is tuple:  # orjson refuses tuple subclasses (named tuples)
            children = [(f"[{index}]", item) for index, item in enumerate(value)]
        else:
            return f"{_path(root, path)} {_refusal(value)}"
        failing = next(((segment, item) for segment, item in children if not _encodes(item)), None)
        if failing is None:  # every part encodes alone: together they nest too deep
            return f"{_path(root, path)} is nested too deep: JSON encoding allows {MAX_DEPTH} levels of containers"
        path.append(failing[0])
        value = failing[1]
    return f"{_path(root, path)} is nested more than {MAX_DEPTH} levels deep (or contains itself)"


_NO_KEY = object()


def _path(root: str, segments: list[str]) -> str:
    """``input["items"][3]``; a long path keeps its ends: ``input[0][0]...(250 levels)...[0]``."""
    if len(segments) <= 12:
        return root + "".join(segments)
    return f"{root}{''.join(segments[:4])}...({len(segments) - 8} levels)...{''.join(segments[-4:])}"


def _refusal(value: Any) -> str:
    """What is wrong with one value JSON refuses, and what to pass instead."""
    kind = type(value).__name__
    a_kind = ("an " if kind[:1].lower() in "aeiou" else "a ") + kind
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return f"is {a_kind}: JSON has no dates or times, pass value.isoformat() (or a unix time) and parse it in the handler"
    if dataclasses.is_dataclass(value):
        return f"is a dataclass ({kind}): pass dataclasses.asdict(value), the handler gets a dict"
    if isinstance(value, (set, frozenset)):
        return f"is a {kind}: JSON has no sets, pass a list"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"is {kind}: JSON has no bytes, pass text (decoded, or base64)"
    if isinstance(value, decimal.Decimal):
        return "is a Decimal: pass str(value) to keep it exact, or a float"
    if isinstance(value, int):
        return "is an int beyond 64 bits: pass it as a str"
    if isinstance(value, str):
        return "is a str that is not valid UTF-8 (it holds a lone surrogate)"
    if isinstance(value, tuple):
        return f"is {a_kind} (a named tuple): pass value._asdict() or a list"
    return f"is {a_kind}, which JSON cannot hold: pass dicts, lists, str, int, float, bool or None"


def _key(key: Any) -> str:
    return orjson.dumps(key).decode() if isinstance(key, str) and _encodes(key) and len(key) <= 60 else _short(key)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
