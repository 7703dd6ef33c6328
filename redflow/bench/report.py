"""Bench results: the text report, the JSON file, and ``--compare``.

A result is a plain dict (what ``--json`` writes): ``meta`` (when, where,
with what options), then ``drain``, ``paced`` and ``idle`` as the phases
return them, and ``peak_rss_mb``. :data:`COMPARED` lists the figures
``--compare`` checks and which way is better for each; :data:`SAME_KIND`
the options a baseline must share to be compared at all, :data:`SAME_SETTING`
those whose difference is worth a warning.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.core.version import VERSION

HIGHER, LOWER = "higher", "lower"
_PERCENTILES = ("p50", "p95", "p99")


def _latency(path: str) -> dict[str, str]:
    return {f"{path}.{p}": LOWER for p in _PERCENTILES}


#: figure path -> which way is better
COMPARED: dict[str, str] = {
    "drain.runs_per_s": HIGHER,
    **_latency("drain.dequeue_to_finalize_ms"),
    "drain.round_trips_per_run": LOWER,
    "drain.commands_per_run": LOWER,
    "drain.worker_cpu_s_per_1000_runs": LOWER,
    "drain.redis_cpu_s_per_1000_runs": LOWER,
    "drain.redis_bytes_kept_per_run": LOWER,
    **_latency("paced.enqueue_to_start_ms"),
    **_latency("paced.dequeue_to_finalize_ms"),
    **_latency("paced.enqueue_to_result_ms"),
    "idle.cpu_percent": LOWER,
    "idle.rss_mb": LOWER,
    "idle.round_trips_per_s": LOWER,
    "peak_rss_mb": LOWER,
}


#: Options under which the figures are measured differently (a subprocess
#: worker's latencies come from the run hashes, in whole milliseconds; steps
#: add commands per run): ``--compare`` refuses a baseline that differs in one.
SAME_KIND: tuple[str, ...] = ("worker", "steps", "replay")
#: Options and machine facts that move the figures: ``--compare`` warns when one differs.
SAME_SETTING: tuple[str, ...] = (
    "concurrency", "runs", "repeat", "rate", "paced_runs", "idle_s", "host", "cpus", "cpu", "python", "redis_version",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Mismatch:
    """An option or machine fact in which a baseline differs from this bench."""

    name: str
    baseline: Any
    current: Any

    def __str__(self) -> str:
        return f"{self.name}: {self.baseline!r} in the baseline, {self.current!r} here"


def mismatches(baseline_meta: dict[str, Any], meta: dict[str, Any], names: tuple[str, ...]) -> list[Mismatch]:
    """The ``names`` whose values differ between ``baseline_meta`` and ``meta`` (one absent counts)."""
    return [Mismatch(name, baseline_meta.get(name), meta.get(name)) for name in names if baseline_meta.get(name) != meta.get(name)]


def machine() -> dict[str, Any]:
    """Where the figures were taken: they mean little without it."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        model = platform.processor()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": model,
        "cpus": os.cpu_count(),
        "load_average": [round(load, 2) for load in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "python": sys.version.split()[0],
        "redflow": VERSION,
    }


def load_text(load_average: list[float] | None) -> str:
    """``[0.4580078125, 0.55, 0.46]`` -> ``"0.46 0.55 0.46 (1, 5, 15 min)"``."""
    if not load_average:
        return "unknown"
    return " ".join(f"{load:.2f}" for load in load_average) + " (1, 5, 15 min)"


def figure(result: dict[str, Any], path: str) -> float | None:
    """The number at a dotted ``path`` of a result, or ``None``."""
    value: Any = result
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# -- compare -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    path: str
    baseline: float
    current: float
    better: str
    regressed: bool

    @property
    def change(self) -> float:
        """Relative change, positive when worse."""
        if self.baseline == 0:
            return 0.0 if self.current == 0 else float("inf")
        ratio = self.current / self.baseline - 1.0
        return ratio if self.better == LOWER else -ratio


def compare(current: dict[str, Any], baseline: dict[str, Any], max_regression: float) -> list[Comparison]:
    """Every figure of :data:`COMPARED` present in both results; a figure
    regressed when it is worse than the baseline by more than ``max_regression``."""
    rows = []
    for path, better in COMPARED.items():
        base, cur = figure(baseline, path), figure(current, path)
        if base is None or cur is None:
            continue
        if better == LOWER:
            regressed = cur > base * (1.0 + max_regression) and cur - base > 1e-9
        else:
            regressed = cur < base * (1.0 - max_regression)
        rows.append(Comparison(path, base, cur, better, regressed))
    return rows


def render_comparison(rows: list[Comparison], max_regression: float, baseline_path: str) -> str:
    lines = [f"compared with {baseline_path} (a figure regresses when worse by more than {max_regression:.0%}):"]
    for row in rows:
        mark = "REGRESSED" if row.regressed else "ok"
        change = f"{abs(row.change):7.1%} {'worse' if row.change > 0 else 'better'}" if row.change else "   same"
        lines.append(f"  {row.path:<40} {row.baseline:>12.4g} -> {row.current:<12.4g} {change:<14} {mark}")
    regressed = [row.path for row in rows if row.regressed]
    lines.append(f"{len(regressed)} regression(s): {', '.join(regressed)}" if regressed else "no regression")
    if not rows:
        lines.append("(no figure in common with the baseline)")
    return "\n".join(lines)


def load(path: str) -> dict[str, Any]:
    """Saved results; :class:`RedflowError` when the file cannot be read or is no bench result."""
    try:
        loaded = codec.loads(Path(path).read_text(encoding="utf-8"), what=f"bench results {path}")
    except OSError as exc:
        raise RedflowError(f"cannot read bench results {path}: {exc.strerror or exc}") from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("meta"), dict):
        raise RedflowError(f"{path} holds no bench results (saved by `redflow-gevent bench --json PATH`)")
    return loaded


def save(result: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(codec.dumps(result) + "\n", encoding="utf-8")


# -- the text report ---------------------------------------------------------------


def _ms(stats: dict[str, float]) -> str:
    return "  ".join(f"{p} {stats[p]:7.3f}" for p in _PERCENTILES if p in stats) + "  ms"


def _split(by_command: dict[str, float], unit: str, most: int = 10) -> str:
    shown = [f"{name} {value:.2f}" for name, value in list(by_command.items())[:most]]
    more = len(by_command) - most
    return ", ".join(shown) + (f", +{more} more" if more > 0 else "") + f" {unit}"


def _drain_lines(drain: dict[str, Any]) -> Iterator[str]:
    repeats = drain.get("repeats_runs_per_s", [])
    spread = f"; the median of {len(repeats)} drains, {min(repeats):,.0f} .. {max(repeats):,.0f}" if len(repeats) > 1 else ""
    yield f"drain   {drain['runs_per_s']:10,.0f} runs/s  ({drain['runs']} runs in {drain['seconds']:.2f} s{spread})"
    yield f"        dequeue->finalize (full load)  {_ms(drain['dequeue_to_finalize_ms'])}"
    yield f"        Redis round trips / run  {drain['round_trips_per_run']:.2f}   commands / run  {drain['commands_per_run']:.2f}"
    yield f"          ({_split(drain['commands_per_run_by_command'], 'per run; includes the commands scripts call')})"
    yield (
        f"        CPU / 1,000 runs: worker {drain['worker_cpu_s_per_1000_runs']:.3f} s, Redis {drain['redis_cpu_s_per_1000_runs']:.3f} s"
    )
    if "redis_cpu_us_per_run" in drain:
        yield (
            f"        Redis CPU / run {drain['redis_cpu_us_per_run']:.0f} µs: one Redis core serves at most "
            f"{drain['runs_per_s_per_redis_core']:,.0f} runs/s"
        )
    if "redis_bytes_kept_per_run" in drain:
        yield f"        Redis memory kept / finished run  {drain['redis_bytes_kept_per_run']:,.0f} bytes (after the drains)"


def _paced_lines(paced: dict[str, Any]) -> Iterator[str]:
    yield f"paced   {paced['rate']:10,.0f} runs/s asked, {paced['achieved_rate']:,.0f} sent  ({paced['runs']} runs, a waiter each)"
    yield f"        enqueue->start     {_ms(paced['enqueue_to_start_ms'])}"
    yield f"        dequeue->finalize  {_ms(paced['dequeue_to_finalize_ms'])}"
    yield f"        enqueue->result    {_ms(paced['enqueue_to_result_ms'])}"


def _idle_lines(idle: dict[str, Any]) -> Iterator[str]:
    yield f"idle    CPU {idle['cpu_percent']:.2f} % of one core, RSS {idle['rss_mb']:.1f} MB  (over {idle['seconds']:.1f} s)"
    yield f"        Redis round trips / s  {idle['round_trips_per_s']:.1f}  ({_split(idle['commands_per_s_by_command'], '/ s')})"


def render(result: dict[str, Any]) -> str:
    meta = result["meta"]
    timing = "hot-path timestamps" if meta["precise_timestamps"] else "run-hash timestamps, 1 ms resolution"
    lines = [
        f"redflow-gevent bench: {meta['workflow']} ({meta['steps']} step(s){', replayed' if meta['replay'] else ''}), "
        f"-c {meta['concurrency']}, {meta['worker']} worker, Redis {meta['redis_version']} ({meta['redis']}), {timing}",
        f"        {meta['date']} on {meta['host']}: {meta['cpus']} CPU(s) {meta['cpu']}, load average {load_text(meta['load_average'])}",
    ]
    if "drain" in result:
        lines += _drain_lines(result["drain"])
    if "paced" in result:
        lines += _paced_lines(result["paced"])
    if "idle" in result:
        lines += _idle_lines(result["idle"])
    lines.append(f"peak RSS {result['peak_rss_mb']:.1f} MB ({meta['worker']} worker{' + the bench' if meta['precise_timestamps'] else ''})")
    return "\n".join(lines)
