"""Server-rendered SVG charts: bars, lines and a step timeline. No I/O, no script.

The markup carries light-theme colours as presentation attributes, so a
chart fetched on its own (``/charts/*.svg``) reads well; inside the
dashboard page the stylesheet's classes override them (CSS beats
presentation attributes), which is how the dark theme recolours them. Every
text is escaped; the output is well-formed XML for any input, empty included.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from redflow.ops.format import fmt_seconds

WIDTH, HEIGHT = 640, 236
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 46, 26
LEGEND_CHARS = 24
X_TICKS = 6
Y_TICKS = 4
MUTED, GRID, FG = "#667085", "#e4e7ec", "#1d2330"
PALETTE = ("#3b5bdb", "#e67700", "#2b8a3e", "#ae3ec9", "#1098ad", "#c92a2a")
STATUS_COLORS = {"succeeded": "#2b8a3e", "failed": "#c92a2a", "canceled": "#868e96", "running": "#1971c2", "queued": "#e6a700"}
XML_PROLOG = '<?xml version="1.0" encoding="UTF-8"?>\n'

ROW_H, LABEL_W, NOTE_W, TIMELINE_W = 22, 180, 250, 1000


def x(text: object) -> str:
    """Escape for XML text and attribute values."""
    return html.escape(str(text), quote=True)


@dataclass(frozen=True, slots=True)
class Series:
    """One named series; ``css`` names its class (``s-<css>``), ``color`` its colour outside the page."""

    name: str
    values: Sequence[float | None]
    css: str
    color: str


def _top(value: float, *, whole: bool = False) -> float:
    """A round top for the y axis: ``Y_TICKS`` steps of 1, 2, 2.5 or 5 times a power of ten (whole steps for counts)."""
    if value <= 0:
        return float(Y_TICKS)
    raw = value / Y_TICKS
    step = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * step >= raw:
            step *= factor
            break
    return (max(1.0, math.ceil(step)) if whole else step) * Y_TICKS


def _svg(width: int, height: int, title: str, body: list[str], css: str, *, heading: bool = True) -> str:
    shown = f'<text class="heading" x="4" y="16" font-size="13" font-weight="600" fill="{FG}">{x(title)}</text>' if heading else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {css}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{x(title)}" font-family="system-ui, sans-serif" font-size="11">'
        f"<title>{x(title)}</title>{shown}{''.join(body)}</svg>"
    )


def _frame(labels: Sequence[str], top: float, y_format: Callable[[float], str], series: Sequence[Series]) -> list[str]:
    """Grid, y labels, x labels and the legend."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    body = []
    for i in range(Y_TICKS + 1):
        y = TOP + plot_h - plot_h * i / Y_TICKS
        body.append(f'<line class="gridline" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        label = y_format(top * i / Y_TICKS)
        body.append(f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{MUTED}">{x(label)}</text>')
    if labels:  # the newest bucket labelled, and every step-th before it
        step = max(1, len(labels) // X_TICKS)
        for i in range(len(labels) - 1, -1, -step):
            cx = LEFT + plot_w * (i + 0.5) / len(labels)
            body.append(f'<text class="axis" x="{cx:.1f}" y="{HEIGHT - 8}" text-anchor="middle" fill="{MUTED}">{x(labels[i])}</text>')
    lx = LEFT
    for s in series:
        name = s.name if len(s.name) <= LEGEND_CHARS else s.name[: LEGEND_CHARS - 1] + "…"
        body.append(f'<rect class="swatch s-{x(s.css)}" x="{lx}" y="25" width="10" height="10" rx="2" fill="{s.color}"/>')
        body.append(f'<text class="legend" x="{lx + 14}" y="34" fill="{FG}">{x(name)}</text>')
        lx += 24 + 7 * len(name)
    return body


def _rect(css: str, left: float, top: float, width: float, height: float, color: str, tip: str, extra: str = "") -> str:
    """A rectangle with a hover title; ``extra`` is trusted attribute markup."""
    return (
        f'<rect class="{x(css)}" x="{left:.1f}" y="{top:.1f}" width="{width:.1f}" height="{height:.1f}" fill="{color}" '
        f'stroke="{color}"{extra}><title>{x(tip)}</title></rect>'
    )


def _empty_note(body: list[str], message: str) -> None:
    body.append(f'<text class="empty" x="{WIDTH / 2:.0f}" y="{HEIGHT / 2 + 6:.0f}" text-anchor="middle" fill="{MUTED}">{x(message)}</text>')


def bar_chart(title: str, labels: Sequence[str], series: Sequence[Series], *, empty: str = "no runs finished in this window") -> str:
    """Stacked bars, one per label (time bucket)."""
    count = len(labels)
    totals = [sum(s.values[i] or 0 for s in series) for i in range(count)]
    top = _top(max(totals, default=0), whole=True)
    body = _frame(labels, top, lambda v: f"{v:g}", series)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(1, count)
    width = max(1.0, slot * 0.76)
    for i in range(count):
        base = float(TOP + plot_h)
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            h = plot_h * value / top
            base -= h
            tip = f"{labels[i]}: {value:g} {s.name}"
            body.append(_rect(f"bar s-{s.css}", LEFT + i * slot + slot * 0.12, base, width, h, s.color, tip))
    if not any(totals):
        _empty_note(body, empty)
    return _svg(WIDTH, HEIGHT, title, body, "bars")


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    empty: str,
    y_format: Callable[[float], str] = lambda v: f"{v:g}",
    whole: bool = False,
) -> str:
    """One polyline per series; ``None`` values break the line (no data in that bucket). ``whole``: counts."""
    count = len(labels)
    values = [v for s in series for v in s.values if v is not None]
    top = _top(max(values, default=0), whole=whole)
    body = _frame(labels, top, y_format, series)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    for s in series:
        runs: list[list[str]] = [[]]
        for i, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            runs[-1].append(f"{LEFT + plot_w * (i + 0.5) / max(1, count):.1f},{TOP + plot_h - plot_h * value / top:.1f}")
        for points in (r for r in runs if r):
            if len(points) == 1:
                px, py = points[0].split(",")
                body.append(f'<circle class="dot s-{x(s.css)}" cx="{px}" cy="{py}" r="2.5" fill="{s.color}"/>')
            else:
                line = " ".join(points)
                body.append(f'<polyline class="line s-{x(s.css)}" points="{line}" fill="none" stroke="{s.color}" stroke-width="2"/>')
    if not values:
        _empty_note(body, empty)
    return _svg(WIDTH, HEIGHT, title, body, "lines")


@dataclass(frozen=True, slots=True)
class Bar:
    """One row of a timeline: offsets in seconds from the timeline's start."""

    label: str
    start_s: float
    end_s: float
    status: str
    note: str = ""
    replayed: bool = False


def timeline(title: str, bars: Sequence[Bar], span_s: float, *, more: int = 0) -> str:
    """A Gantt-like row per bar over ``span_s`` seconds; ``more`` rows were left out."""
    span_s = max(span_s, 0.001)
    plot_w = TIMELINE_W - LABEL_W - NOTE_W
    height = 30 + ROW_H * max(1, len(bars)) + (18 if more else 4)
    body = []
    for i in range(5):
        gx = LABEL_W + plot_w * i / 4
        body.append(f'<line class="gridline" x1="{gx:.1f}" x2="{gx:.1f}" y1="22" y2="{height - 4}" stroke="{GRID}"/>')
        body.append(f'<text class="axis" x="{gx:.1f}" y="14" text-anchor="middle" fill="{MUTED}">+{x(fmt_seconds(span_s * i / 4))}</text>')
    for row, bar in enumerate(bars):
        y = 26 + row * ROW_H
        label = bar.label if len(bar.label) <= 30 else bar.label[:29] + "…"
        body.append(f'<text class="label" x="{LABEL_W - 8}" y="{y + 13}" text-anchor="end" fill="{FG}">{x(label)}</text>')
        bx = LABEL_W + plot_w * max(0.0, bar.start_s) / span_s
        bw = max(2.0, plot_w * max(0.0, bar.end_s - bar.start_s) / span_s)
        css = f"bar s-{bar.status}" + (" replayed" if bar.replayed else "")
        tip = f"{bar.label}: {bar.status}, {fmt_seconds(max(0.0, bar.end_s - bar.start_s))}{' - ' + bar.note if bar.note else ''}"
        extra = ' rx="3" stroke-dasharray="3 2" fill-opacity="0.35"' if bar.replayed else ' rx="3"'
        body.append(_rect(css, bx, y + 3, bw, ROW_H - 7, STATUS_COLORS.get(bar.status, MUTED), tip, extra))
        text = fmt_seconds(max(0.0, bar.end_s - bar.start_s)) + (f" · {bar.note}" if bar.note else "")
        body.append(f'<text class="note" x="{LABEL_W + plot_w + 12}" y="{y + 13}" fill="{MUTED}">{x(text)}</text>')
    if not bars:
        body.append(f'<text class="empty" x="{LABEL_W}" y="40" fill="{MUTED}">no steps yet</text>')
    if more:
        body.append(f'<text class="empty" x="{LABEL_W}" y="{height - 6}" fill="{MUTED}">… and {more} more (see the table)</text>')
    return _svg(TIMELINE_W, height, title, body, "timeline", heading=False)
