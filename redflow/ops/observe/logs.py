"""Logging set-up for the command line: text or one JSON object per line.

redflow logs through stdlib ``logging``, one logger per module under
``redflow``; records about a run carry ``run_id``, ``workflow`` and
``attempt`` as ``extra`` fields, which the JSON format prints as keys.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import orjson

_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One orjson line per record, with the record's ``extra`` fields as keys."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


#: Control characters (C0, DEL, C1) and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``)."""
    return _CONTROL.sub(_escaped, text)


class TextFormatter(logging.Formatter):
    """One record, one line: a message can never forge a record of its own.

    Messages come from run data (error messages, workflow names), so control
    characters in them are escaped. A traceback keeps its lines, each
    indented under the record, with its own control characters escaped: a
    line at column 0 is always the start of a record.
    """

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_controls(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return "\n".join("    " + escape_controls(line) for line in super().formatException(ei).splitlines())

    def formatStack(self, stack_info: str) -> str:
        return "\n".join("    " + escape_controls(line) for line in stack_info.splitlines())


def setup_logging(level: str = "info", fmt: str = "text", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
