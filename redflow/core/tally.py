"""What the charts are made of: latency histograms, time buckets and percentiles.

Workers count attempts in memory (a histogram bin per workflow) and add
the counts to one Redis hash per time bucket every few seconds; readers
merge the bins of a bucket and read percentiles off them. So the hot path
pays an increment per attempt and no Redis command. No I/O here: this
module spells the fields of a ``P:stats:<span>:<start>`` hash and does the
arithmetic.

Fields of a bucket hash:

- ``d:<queue>``: the highest ready-list length sampled in the bucket;
- ``s:<bin>:<workflow>``: first attempts whose enqueue-to-start wait fell in ``bin``;
- ``r:<bin>:<workflow>``: attempts whose duration (start to settle) fell in ``bin``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

#: Upper bounds of the histogram bins, in ms; one more bin holds everything above.
BIN_BOUNDS_MS: Final = (
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000,
    60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000,
)  # fmt: skip
OVERFLOW_BIN: Final = len(BIN_BOUNDS_MS)

DEPTH: Final = "d"
START: Final = "s"  # enqueue to start
DURATION: Final = "r"  # one attempt, start to settle


@dataclass(frozen=True, slots=True)
class Resolution:
    """Bucket width of a chart window, and how long its buckets are kept."""

    span_s: int
    keep_s: int
    buckets: int  # how many the window shows

    @property
    def span_ms(self) -> int:
        return self.span_s * 1000

    def start_of(self, t_ms: int) -> int:
        """Start of the bucket holding ``t_ms``."""
        return t_ms - t_ms % self.span_ms

    def starts(self, now_ms: int) -> list[int]:
        """Starts of the window's buckets, oldest first, the current (partial) one last."""
        last = self.start_of(now_ms)
        return [last - (self.buckets - 1 - i) * self.span_ms for i in range(self.buckets)]


#: Chart windows: the last hour by minute, the last day by quarter hour.
RESOLUTIONS: Final = {
    "1h": Resolution(span_s=60, keep_s=2 * 3600, buckets=60),
    "24h": Resolution(span_s=900, keep_s=26 * 3600, buckets=96),
}


def bin_of(ms: float) -> int:
    """The histogram bin of a duration in ms (values <= a bound land in its bin)."""
    return bisect_left(BIN_BOUNDS_MS, ms)


def bin_upper_ms(index: int) -> int:
    """The upper bound of bin ``index``; the overflow bin reports the last bound."""
    return BIN_BOUNDS_MS[min(index, OVERFLOW_BIN - 1)]


def histogram_field(kind: str, index: int, workflow: str) -> str:
    return f"{kind}:{index}:{workflow}"


def depth_field(queue: str) -> str:
    return f"{DEPTH}:{queue}"


@dataclass(slots=True)
class Bucket:
    """One bucket read back: depth per queue and merged histograms."""

    depth: dict[str, int]
    start_bins: dict[str, list[int]]  # workflow -> counts per bin
    duration_bins: dict[str, list[int]]

    def merged(self, kind: str) -> list[int]:
        """The bins of every workflow added together."""
        per_workflow = self.start_bins if kind == START else self.duration_bins
        total = [0] * (OVERFLOW_BIN + 1)
        for counts in per_workflow.values():
            for i, n in enumerate(counts):
                total[i] += n
        return total


def parse_bucket(fields: Mapping[str, str]) -> Bucket:
    """A bucket hash as read from Redis; fields that do not parse are left out
    (another version may add kinds this one does not know)."""
    bucket = Bucket({}, {}, {})
    for name, raw in fields.items():
        kind, _, rest = name.partition(":")
        try:
            value = int(raw)
        except ValueError:
            continue
        if kind == DEPTH:
            bucket.depth[rest] = value
            continue
        index_text, _, workflow = rest.partition(":")
        if kind not in (START, DURATION) or not index_text.isdigit() or int(index_text) > OVERFLOW_BIN:
            continue
        target = bucket.start_bins if kind == START else bucket.duration_bins
        target.setdefault(workflow, [0] * (OVERFLOW_BIN + 1))[int(index_text)] += value
    return bucket


def histogram_percentile(bins: Sequence[int], p: float) -> int | None:
    """The ``p``-th percentile of a histogram, as the upper bound of the bin
    holding that rank (so an upper estimate, at most one bin off); ``None`` if empty."""
    total = sum(bins)
    if total == 0:
        return None
    rank = _rank(p, total)
    seen = 0
    for index, count in enumerate(bins):
        seen += count
        if seen >= rank:
            return bin_upper_ms(index)
    return bin_upper_ms(OVERFLOW_BIN)


def nearest_rank(values: Iterable[float], p: float) -> float | None:
    """The ``p``-th percentile by the nearest-rank method: the smallest value
    with at least ``p`` % of the values at or below it (always one of them)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[_rank(p, len(ordered)) - 1]


def _rank(p: float, count: int) -> int:
    """``ceil(p / 100 * count)``, at least 1, in exact arithmetic (0.95 * 20 must be 19, not 19.000000000000004)."""
    return max(1, math.ceil(Fraction(str(p)) * count / 100))
