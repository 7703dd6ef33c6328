"""Values in words for people: times, durations, errors, payload previews, why a
run waits, and aligned text tables.

Shared by the commands, the dashboard and its charts, so that they say the
same things the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from redflow.core.models import WAIT_CHILDREN, WAIT_EVENT, WAIT_SIGNAL, WAIT_SLEEP, Run, Step
from redflow.ops.shown import shown_json

PREVIEW_CHARS = 60


def fmt_time(t: float | None) -> str:
    """Unix seconds as UTC ``YYYY-mm-dd HH:MM:SS``; ``-`` for none."""
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def fmt_setting_s(seconds: float) -> str:
    """A configured duration as the command line takes it: ``30s``, ``1m30s``, ``1h``, ``1.5s``."""
    if seconds < 60:
        return f"{seconds:g}s"
    rest, parts = round(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def fmt_duration(start: float | None, end: float | None) -> str:
    return "-" if start is None or end is None else fmt_seconds(max(0.0, end - start))


def fmt_attempt(run: Run) -> str:
    return f"{run.attempt}/{run.max_attempts}"


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """Compact JSON of ``value``, cut to ``limit`` characters."""
    return shown_json(value, limit)


def fmt_error(error: dict[str, Any] | None) -> str:
    if not error:
        return "-"
    return f"{error.get('name', 'Error')}: {error.get('message', '')} ({error.get('kind', 'error')})"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns, two spaces apart."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def describe_wait(run: Run, steps: Sequence[Step]) -> str:
    """Why a parked run is ``scheduled`` (a durable wait), in words; ``-`` when it is not parked."""
    if run.status != "scheduled" or not run.parked_for:
        return "-"
    wait = next((s.wait for s in steps if s.name == run.parked_step and s.wait is not None), None)
    step = f"step {run.parked_step!r}"
    if run.parked_for == WAIT_SLEEP:
        return f"sleeping until {fmt_time(run.available_at)} ({step})"
    if run.parked_for == WAIT_EVENT:
        event = f"event {wait.event!r}" if wait is not None and wait.event else "an event"
        match = f" matching {preview(wait.match)}" if wait is not None and wait.match else ""
        timeout = f", times out {fmt_time(wait.timeout_at_ms / 1000)}" if wait is not None and wait.timeout_at_ms else ""
        return f"waiting for {event}{match} ({step}{timeout})"
    if run.parked_for == WAIT_SIGNAL:
        signal = f"signal {wait.signal!r}" if wait is not None and wait.signal else "a signal"
        timeout = f", times out {fmt_time(wait.timeout_at_ms / 1000)}" if wait is not None and wait.timeout_at_ms else ""
        return f"waiting for {signal} ({step}{timeout})"
    if run.parked_for == WAIT_CHILDREN:
        children = f"its {len(wait.children)} children" if wait is not None else "its children"
        return f"waiting for {children} to end ({step})"
    return f"parked: {run.parked_for} ({step})"


def fmt_step_outcome(step: Step, limit: int = PREVIEW_CHARS) -> str:
    """A step's output, its error, or what it waits for."""
    if step.error is not None:
        return fmt_error(step.error)
    if step.wait is not None:
        return f"(waiting: {step.wait.kind})"
    return preview(step.output, limit)


def fmt_tries(step: Step) -> str:
    """Which try of a step with a retry policy wrote its record (``try 2``), or ""."""
    return f"try {step.tries}" if step.tries else ""


def fmt_step_status(step: Step) -> str:
    """A step's status, with the try that wrote it for a step with a retry policy: ``failed (try 2)``."""
    return f"{step.status} ({fmt_tries(step)})" if step.tries else step.status


def fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def fmt_optional_s(seconds: float | None) -> str:
    return "-" if seconds is None else fmt_seconds(seconds)
