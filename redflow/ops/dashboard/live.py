"""A run's output stream, live on its page: ``GET /runs/<id>/stream`` as
server-sent events, and the page's section that shows it.

gevent's WSGI server holds an event stream cheaply (a greenlet and a socket);
each one also holds a Redis connection of the dashboard's pool while it
blocks, so at most ``max_live`` are open at once (503 beyond, and the page
still shows the items it was served with). Events: ``item`` (``id``: the item
id, data ``{"attempt", "at", "json"}``: the value as compact JSON text, shown
as such), a comment every idle block slice (a browser that went away is
noticed at the next write), and ``end`` (data ``{"status"}``) when the run
ends. A connection lasts at most ``live_for_s``; the browser then connects
again with ``Last-Event-ID`` (or ``?after=``) and goes on after that item.
The script (``assets/stream.js``) appends items as text, never as HTML.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs

from redis.exceptions import RedisError

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.errors import RedflowError, RunNotFoundError
from redflow.core.models import Run
from redflow.core.models.streams import StreamItem
from redflow.core.streams import check_after
from redflow.ops.dashboard.markup import h, run_url
from redflow.ops.dashboard.web import HttpError, allow, one
from redflow.ops.shown import shown_json
from redflow.store import streams

log = logging.getLogger("redflow.dashboard")

MAX_LIVE = 64
LIVE_FOR_S = 300.0
#: How many of the newest items the run page is served with (the live ones follow them).
SHOWN_ITEMS = 200
#: How much of one item the page shows.
SHOWN_CHARS = 2000
HEADERS = [("Content-Type", "text/event-stream; charset=utf-8"), ("X-Accel-Buffering", "no")]


class LiveStreams:
    """The ``/runs/<id>/stream`` route: each request gets its own follower."""

    def __init__(self, client: RedflowClient, *, max_live: int = MAX_LIVE, live_for_s: float = LIVE_FOR_S) -> None:
        self.client = client
        self.max_live = max_live
        self.live_for_s = live_for_s
        self.open_count = 0

    def open(self, environ: dict[str, Any], run_id: str) -> Iterator[bytes]:
        """The event stream of ``run_id``, after the item the browser last had: 404 for
        no such run, 400 for a malformed id, 503 when ``max_live`` are open already."""
        allow(environ.get("REQUEST_METHOD", "GET"), "GET")
        if self.open_count >= self.max_live:
            raise HttpError("503 Service Unavailable", "Too many live streams open; reload later.", [("Retry-After", "30")])
        query = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=20)
        try:
            after = check_after(environ.get("HTTP_LAST_EVENT_ID") or one(query, "after") or None)
        except RedflowError:
            raise HttpError("400 Bad Request", "after: not an item id of a stream.") from None
        try:
            follower = streams.StreamFollower(self.client.store, run_id, after=after)
            first = follower.read()
        except RunNotFoundError:
            raise HttpError("404 Not Found", f"No run {run_id}.") from None
        return self._events(follower, first)

    def _events(self, follower: streams.StreamFollower, first: Sequence[StreamItem]) -> Iterator[bytes]:
        self.open_count += 1
        try:
            yield b"retry: 2000\n\n" + _items(first)
            until = time.monotonic() + self.live_for_s
            while not follower.ended and time.monotonic() < until:
                yield _items(follower.poll(min(streams.BLOCK_SLICE_S, max(0.01, until - time.monotonic())))) or b": idle\n\n"
            if follower.ended:
                yield b"event: end\ndata: " + codec.dumps({"status": follower.status or "gone"}).encode() + b"\n\n"
        except RedisError as exc:  # the browser connects again after its retry delay
            log.warning("dashboard: the live stream of run %s stopped: %s", follower.run_id, exc)
        finally:
            self.open_count -= 1


def _items(items: Sequence[StreamItem]) -> bytes:
    events = (
        f"event: item\nid: {item.id}\ndata: {codec.dumps({'attempt': item.attempt, 'at': item.written_at, 'json': _shown(item)})}\n\n"
        for item in items
    )
    return "".join(events).encode()


def _shown(item: StreamItem) -> str:
    return shown_json(item.value, SHOWN_CHARS, indent=False)


def stream_section(client: RedflowClient, base: str, run: Run) -> str:
    """The run page's Stream section: its newest items and, while the run has not
    ended, the live view's hook (``assets/stream.js``); nothing for a finished run
    that streamed nothing."""
    items = streams.latest(client.store, run.id, SHOWN_ITEMS + 1)
    if not items and run.is_terminal:
        return ""
    older = len(items) > SHOWN_ITEMS
    items = items[-SHOWN_ITEMS:]
    rows = "".join(
        f'<li><span class="attempt" title="attempt">{h(item.attempt)}</span><code>{h(_shown(item))}</code></li>' for item in items
    )
    note = f'<p class="muted">The newest {SHOWN_ITEMS} items; <code>redflow-gevent runs tail</code> prints them all.</p>' if older else ""
    if run.is_terminal:
        state = f'<p class="muted" id="stream-state">{len(items)} item(s); the run ended.</p>'
    else:
        src = f"{run_url(base, run.id)}/stream?after={items[-1].id if items else '0-0'}"
        state = f'<p class="muted" id="stream-state" data-src="{h(src)}">Live: new items appear here as the run writes them.</p>'
    script = f'<script src="{h(base)}/static/stream.js" defer></script>' if not run.is_terminal else ""
    return f'<section class="stream"><h2>Stream</h2>{note}<ol class="stream-items" id="stream-items">{rows}</ol>{state}{script}</section>'
