"""The dashboard's charts, read from Redis and drawn (:mod:`redflow.ops.dashboard.charts`).

- *Finished runs per bucket by status*: counts by score range over the
  ``runs:status:<terminal>`` indexes (a score is the time the run entered
  the status), so it costs the engine nothing and is exact for every run
  still stored, whoever ran it. A run retried after it failed leaves the
  failed index, and its bar with it.
- *Queue depth*, *enqueue to start* and *attempt duration*: the tallies the
  workers flush every beat (:mod:`redflow.engine.heartbeat`); percentiles
  are read off histogram bins, so they are upper bounds at most one bin off.

Every chart is one pipelined round trip (ZCOUNTs, or HGETALLs of at most
96 bucket hashes), whatever the number of runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from redflow.client import RedflowClient
from redflow.core import tally
from redflow.core.errors import RedflowError
from redflow.ops.dashboard.charts import PALETTE, STATUS_COLORS, Series, bar_chart, line_chart
from redflow.ops.format import fmt_seconds
from redflow.ops.views.queues import index_queues

FINISHED = ("succeeded", "failed", "canceled")
MAX_QUEUE_LINES = len(PALETTE)
CHART_NAMES = ("throughput", "depth", "start-latency", "duration")
_PERCENTILES = (("p50", 50, PALETTE[0]), ("p95", 95, PALETTE[1]))


@dataclass(frozen=True, slots=True)
class Window:
    """The buckets of one chart window, oldest first."""

    name: str
    resolution: tally.Resolution
    starts_ms: list[int]

    @property
    def labels(self) -> list[str]:
        return [datetime.fromtimestamp(start / 1000, UTC).strftime("%H:%M") for start in self.starts_ms]

    @property
    def per(self) -> str:
        return "minute" if self.resolution.span_s == 60 else f"{self.resolution.span_s // 60} min"


def window_of(client: RedflowClient, name: str) -> Window:
    """The ``1h`` or ``24h`` window ending now (Redis's clock)."""
    resolution = tally.RESOLUTIONS.get(name)
    if resolution is None:
        raise RedflowError(f"a chart window is one of {', '.join(tally.RESOLUTIONS)}, not {name!r}")
    return Window(name, resolution, resolution.starts(client.now_ms()))


def finished_counts(client: RedflowClient, window: Window) -> dict[str, list[int]]:
    """Runs that entered each terminal status in each bucket (all queues)."""
    queues = index_queues(client)
    span = window.resolution.span_ms
    pipe = client.redis.pipeline(transaction=False)
    for status in FINISHED:
        for queue in queues:
            index = client.keys.runs_status(status, queue)
            for start in window.starts_ms:
                pipe.zcount(index, start, f"({start + span}")
    replies = iter(pipe.execute())
    counts = {status: [0] * len(window.starts_ms) for status in FINISHED}
    for status in FINISHED:
        for _ in queues:
            for i in range(len(window.starts_ms)):
                counts[status][i] += next(replies)
    return counts


def read_buckets(client: RedflowClient, window: Window) -> list[tally.Bucket]:
    """The workers' tallies of each bucket (empty where none was flushed)."""
    pipe = client.redis.pipeline(transaction=False)
    for start in window.starts_ms:
        pipe.hgetall(client.keys.stats_bucket(window.resolution.span_s, start))
    return [tally.parse_bucket(fields) for fields in pipe.execute()]


def throughput_chart(window: Window, counts: dict[str, list[int]]) -> str:
    series = [Series(status, counts[status], status, STATUS_COLORS[status]) for status in FINISHED]
    return bar_chart(f"Finished runs per {window.per}", window.labels, series, empty="no runs finished in this window")


def depth_chart(window: Window, buckets: list[tally.Bucket]) -> str:
    """One line per queue (the deepest few), from the highest ready length sampled in each bucket."""
    peaks: dict[str, int] = {}
    for bucket in buckets:
        for queue, depth in bucket.depth.items():
            peaks[queue] = max(peaks.get(queue, 0), depth)
    shown = sorted(peaks, key=lambda q: (-peaks[q], q))[:MAX_QUEUE_LINES]
    series = [Series(queue, [b.depth.get(queue) for b in buckets], f"q{i}", PALETTE[i]) for i, queue in enumerate(sorted(shown))]
    title = f"Queue depth (ready runs, peak per {window.per})"
    return line_chart(title, window.labels, series, empty="no samples yet: workers sample their queues every beat", whole=True)


def latency_chart(window: Window, buckets: list[tally.Bucket], kind: str) -> str:
    """p50 and p95 per bucket, all workflows together."""
    bins = [bucket.merged(kind) for bucket in buckets]
    series = [Series(name, [tally.histogram_percentile(b, p) for b in bins], name, color) for name, p, color in _PERCENTILES]
    title = "Enqueue to start (first attempts)" if kind == tally.START else "Attempt duration (start to settle)"
    return line_chart(title, window.labels, series, y_format=_ms, empty="no attempts in this window")


def _ms(value: float) -> str:
    return fmt_seconds(value / 1000.0)


def render_charts(client: RedflowClient, window_name: str, names: tuple[str, ...] = CHART_NAMES) -> dict[str, str]:
    """SVG of each chart in ``names`` over the window (the tallies read once for all)."""
    window = window_of(client, window_name)
    unknown = [name for name in names if name not in CHART_NAMES]
    if unknown:
        raise RedflowError(f"no chart {unknown[0]!r}; there are {', '.join(CHART_NAMES)}")
    buckets = read_buckets(client, window) if set(names) - {"throughput"} else []
    drawers: dict[str, Callable[[], str]] = {
        "throughput": lambda: throughput_chart(window, finished_counts(client, window)),
        "depth": lambda: depth_chart(window, buckets),
        "start-latency": lambda: latency_chart(window, buckets, tally.START),
        "duration": lambda: latency_chart(window, buckets, tally.DURATION),
    }
    return {name: drawers[name]() for name in names}
