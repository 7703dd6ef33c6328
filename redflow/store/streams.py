"""Reading a run's output stream: a page after an id, the latest items, and
following it live until the run ends.

A follower reads a page with the run's status (``read_stream.lua``, which
also marks an unfinished run so that its end is announced) and, when it has
read everything and the run has not ended, blocks on ``XREAD`` over the
item stream and the run's signal stream at once: an item wakes it, and so
does the end entry the script that ends the run adds (``announce_end`` in
``finalize.lua``). No polling: it reads the run again only after a wake-up
by the signal stream, or after :data:`BLOCK_SLICE_S` without one, which is
the fallback for a run ended by a client that announces nothing (the
TypeScript worker) and for a run deleted meanwhile. An idle follower costs
two round trips (5 commands: the XREAD, the script and its HMGET, XREVRANGE
and XRANGE) per slice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from redis.exceptions import TimeoutError as RedisTimeoutError

from redflow.core.errors import RunNotFoundError, TimeoutError
from redflow.core.keys import TERMINAL_STATUSES
from redflow.core.models.streams import RECORD, StreamItem, stream_item
from redflow.core.streams import START, check_after, check_limit, check_timeout_s
from redflow.store.port import Store
from redflow.store.replies import StreamPage

#: The longest a follower blocks before it reads the run again (see the module's docstring).
BLOCK_SLICE_S = 5.0
#: How many items a follower reads at a time.
FOLLOW_PAGE = 100


def read_page(store: Store, run_id: str, *, after: Any = None, limit: Any = 100) -> list[StreamItem]:
    """Up to ``limit`` items of the run's stream after the item id ``after`` (None: from
    the first), oldest first; :class:`RunNotFoundError` for an unknown run."""
    after_id, count = check_after(after), check_limit(limit)
    found, queue = store.locator.slot_queue(run_id)
    page = store.scripts.read_stream(run_id=run_id, queue=queue, after=after_id, count=count, watch=False) if found else None
    if page is None or not page.status:
        raise RunNotFoundError(run_id)
    return _items(page, run_id)


def latest(store: Store, run_id: str, count: int) -> list[StreamItem]:
    """The newest ``count`` items of the run's stream, oldest first (none for an unknown run)."""
    found, queue = store.locator.slot_queue(run_id)
    if not found:
        return []
    entries = store.redis.xrevrange(store.keys.run_stream(run_id, queue), count=check_limit(count))
    return [stream_item(entry_id, fields.get(RECORD), f"run {run_id}") for entry_id, fields in reversed(entries)]


def _items(page: StreamPage, run_id: str) -> list[StreamItem]:
    return [stream_item(entry_id, record, f"run {run_id}") for entry_id, record in page.entries]


class StreamFollower:
    """Follows one run's stream from ``after``: :meth:`poll` gives the next items,
    waiting for them; :attr:`ended` once the run has ended and every item was given
    (:attr:`status` is then its final status, or "" if the run was deleted)."""

    def __init__(self, store: Store, run_id: str, *, after: Any = None, page: int = FOLLOW_PAGE) -> None:
        self.store, self.run_id, self.after, self.page = store, run_id, check_after(after), check_limit(page)
        found, self.queue = store.locator.slot_queue(run_id)
        if not found:
            raise RunNotFoundError(run_id)
        keys = store.keys
        self._keys = (keys.run_stream(run_id, self.queue), keys.run_stream_signal(run_id, self.queue))
        self.status = ""
        self.ended = False
        self._signals_at = START
        self._read_next = True
        self._opened = False

    def read(self) -> list[StreamItem]:
        """A page of items after the last one given, with the run's status (an unknown run:
        :class:`RunNotFoundError` on the first read, the end on a later one)."""
        page = self.store.scripts.read_stream(run_id=self.run_id, queue=self.queue, after=self.after, count=self.page, watch=True)
        if not page.status and not self._opened:
            raise RunNotFoundError(self.run_id)
        self._opened = True
        self.status, self._signals_at = page.status, page.signals_at
        items = _items(page, self.run_id)
        if items:
            self.after = items[-1][0]
        # a full page may have more behind it; an ended run's last page is its last
        self._read_next = len(items) == self.page
        self.ended = not self._read_next and (not page.status or page.status in TERMINAL_STATUSES)
        return items

    def poll(self, block_s: float) -> list[StreamItem]:
        """The next items; when there are none yet, wait up to ``block_s`` seconds for some
        or for the run's end (then :attr:`ended`). An empty list: nothing within ``block_s``."""
        if self._read_next:
            page = self.read()
            if page or self.ended:
                return page
        stream_key, signal_key = self._keys
        self._read_next = True  # a signal, or nothing within the slice: read the run again
        try:
            reply = self.store.redis.xread(
                {stream_key: self.after, signal_key: self._signals_at}, count=self.page, block=max(1, int(block_s * 1000))
            )
        except RedisTimeoutError:  # a socket_timeout shorter than the slice: as a slice with nothing
            return []
        items: list[StreamItem] = []
        for key, entries in _streams_of(reply):
            if key == stream_key and entries:
                items = [stream_item(entry_id, fields.get(RECORD), f"run {self.run_id}") for entry_id, fields in entries]
                self.after = items[-1][0]
                self._read_next = False
        for key, entries in _streams_of(reply):
            if key == signal_key and entries:
                self._read_next = True
        return items


def _streams_of(reply: Any) -> list[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """XREAD's reply as (key, entries) pairs, whichever protocol redis-py speaks."""
    if not reply:
        return []
    return list(reply.items()) if isinstance(reply, dict) else [(key, entries) for key, entries in reply]


def follow(store: Store, run_id: str, *, after: Any = None, timeout: Any = None, slice_s: float = BLOCK_SLICE_S) -> Iterator[StreamItem]:
    """The run's items after ``after``, in order, as they are written, until the run ends
    (a run that ended long ago: its items, then the end); :class:`TimeoutError` if it has
    not ended within ``timeout`` seconds (None: no limit). An unknown run, a bad ``after``
    or ``timeout`` raise here, before the first item."""
    timeout_s = check_timeout_s(timeout)
    follower = StreamFollower(store, run_id, after=after)
    first = follower.read()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    return _follow(follower, first, deadline, slice_s)


def _follow(follower: StreamFollower, first: list[StreamItem], deadline: float | None, slice_s: float) -> Iterator[StreamItem]:
    yield from first
    while not follower.ended:
        remaining_s = slice_s if deadline is None else deadline - time.monotonic()
        if remaining_s <= 0:
            raise TimeoutError(f"Timed out following the stream of run {follower.run_id} (it has not ended)")
        yield from follower.poll(min(slice_s, remaining_s))
