"""Payloads shown to people (dashboard, ``runs show``): bounded, and never failing.

A run's input, output or error is whatever a client stored: it may be 50 MB,
nested deeper than orjson encodes (254 levels) or decodes (1,024: those reach
here as :class:`~redflow.models.Unreadable`). None of that may fail a page;
what is shown is at most ``limit`` characters, with a marker saying why it is
not the plain formatted value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from redflow.core.models import Unreadable

CUT_MARKER = "\n... (cut)"
UNREADABLE_MARKER = "(unreadable, shown as stored: {reason})\n"
TOO_DEEP_MARKER = "(nested too deep to indent, shown compact)\n"


def shown_json(value: Any, limit: int, *, indent: bool = False) -> str:
    """``value`` as JSON text of at most about ``limit`` characters."""
    if isinstance(value, Unreadable):
        return cut(UNREADABLE_MARKER.format(reason=value.reason) + value.raw, limit)
    try:
        text = orjson.dumps(value, option=(orjson.OPT_INDENT_2 if indent else 0) | orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # too deep (or a type JSON has no word for)
        return cut(TOO_DEEP_MARKER + "".join(_pieces_until(value, limit)), limit)
    return cut(text, limit)


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - len(CUT_MARKER), 0)] + CUT_MARKER


class _Literal(str):
    """Punctuation already written as JSON, on the stack among values."""


def _pieces_until(value: Any, limit: int) -> Iterator[str]:
    """Compact JSON of ``value`` without recursion, stopping past ``limit`` characters."""
    stack: list[Any] = [value]
    written = 0
    while stack and written <= limit:
        item = stack.pop()
        if isinstance(item, _Literal):
            piece = str(item)
        elif isinstance(item, dict):
            piece = "{"
            stack.append(_Literal("}"))
            for i, (key, inner) in enumerate(reversed(list(item.items()))):
                stack += ([_Literal(",")] if i else []) + [inner, _Literal(_scalar(str(key)) + ":")]
        elif isinstance(item, (list, tuple)):
            piece = "["
            stack.append(_Literal("]"))
            for i, inner in enumerate(reversed(item)):
                stack += ([_Literal(",")] if i else []) + [inner]
        else:
            piece = _scalar(item)
        written += len(piece)
        yield piece


def _scalar(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return orjson.dumps(repr(value)).decode()
