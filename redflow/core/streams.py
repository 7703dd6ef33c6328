"""A run's output stream: its bounds, the arguments a reader passes, checked, and
``ctx.stream``'s writer (positions within an attempt; what a resumed run skips).

No I/O. The stored form is :mod:`redflow.core.models.streams`; the reading
and following is ``store/streams.py``; ``ctx.stream`` is ``engine/streams.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from redflow.core.errors import RedflowError
from redflow.core.models.streams import item_record_json

#: The bound of one run's stream: each write trims it to about this many items
#: (``XADD MAXLEN ~``: Redis drops whole nodes of 100 entries, so it may hold up to 99
#: more), the oldest going first. A reader that is that far behind skips them.
MAX_ITEMS: Final = 10_000
#: The end entries a run's signal stream keeps (``MAXLEN ~``, as the asyncio package's).
MAX_SIGNALS: Final = 64
#: The most items one read returns (``read_stream(limit=)``, a page of a follower).
MAX_READ: Final = 1000
#: Where a stream starts: ``after=None`` reads from the first item.
START: Final = "0-0"

_ID = re.compile(r"(\d{1,20})-(\d{1,20})")
_U64_MAX: Final = 2**64 - 1


def check_after(after: Any) -> str:
    """The id to read after: ``None`` for the start, else an item id as a read gave it
    (``"<ms>-<seq>"``); anything else is a :class:`RedflowError` saying so."""
    if after is None:
        return START
    text = after if isinstance(after, str) else ""
    found = _ID.fullmatch(text)
    parts = (int(found.group(1)), int(found.group(2))) if found else (0, _U64_MAX + 1)
    if max(parts) > _U64_MAX or min(parts) == _U64_MAX:  # nothing is after the last id there can be
        raise RedflowError(f"after= must be None or a stream item id as read_stream gives it (like '1718000000000-0'), not {after!r}")
    return text


def check_limit(limit: Any) -> int:
    """How many items one read may return: an int from 1 to :data:`MAX_READ`."""
    if type(limit) is not int or not 1 <= limit <= MAX_READ:
        raise RedflowError(f"limit must be an int from 1 to {MAX_READ}, not {limit!r}")
    return limit


def check_timeout_s(timeout: Any) -> float | None:
    """How long a follower may wait for a run's end: ``None`` (no limit) or seconds > 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise RedflowError(f"timeout must be None or a number of seconds > 0, not {timeout!r}")
    return float(timeout)


#: Writes the item at ``position`` of ``attempt`` (its record JSON) unless that position
#: was written before the run last parked; returns the last such position (0: none).
StreamSink = Callable[[int, int, str], int]


class StreamWriter:
    """``ctx.stream(value)``: append ``value`` (JSON, like an input) to the run's output
    stream, read with ``handle.stream()``, ``client.read_stream()``, ``redflow-gevent
    runs tail`` and the dashboard. A value that is not JSON raises
    :class:`~redflow.SerializationError` and writes nothing. See docs/guide/streams.md."""

    __slots__ = ("_sink", "_attempt", "_now_ms", "_position", "_replayed")

    def __init__(self, sink: StreamSink, attempt: int, now_ms: Callable[[], int]) -> None:
        self._sink = sink
        self._attempt = attempt
        self._now_ms = now_ms
        self._position = 0
        self._replayed = 0

    def __repr__(self) -> str:
        return f"StreamWriter(attempt={self._attempt}, position={self._position})"

    def __call__(self, value: Any) -> None:
        record = item_record_json(value, self._attempt, self._now_ms())
        self._position += 1
        if self._position > self._replayed:
            self._replayed = self._sink(self._attempt, self._position, record)
