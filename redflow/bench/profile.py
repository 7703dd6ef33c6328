"""``bench --profile``: py-spy samples the worker while it drains.

py-spy reads the worker's stack from outside (no tracing hook inside the
worker, so the figures stay close to unprofiled ones), and it sees what
the OS thread runs: the current greenlet, or the gevent hub. In-process
profilers that follow greenlets as threads (pyinstrument) or that trace
calls (cProfile, confused by greenlet switches) give a worse picture of a
gevent worker. The raw output is collapsed stacks, one per line
(``frame;frame;... count``), which flamegraph tools read; the bench prints
the functions with the most samples of their own.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent

from redflow.bench.probe import BenchError
from redflow.ops.cli.values import usage_error

SAMPLE_RATE_HZ = 250
ATTACH_S = 0.3  # py-spy's start-up, before the measured work begins
_LINE = re.compile(r":\d+\)$")


def py_spy_binary() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        usage_error("bench --profile needs py-spy: pip install py-spy")
    return found


@contextlib.contextmanager
def recording(path: str, pid: int) -> Iterator[None]:
    """Sample ``pid`` into ``path`` (collapsed stacks) while the block runs."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    command = [py_spy_binary(), "record", "--pid", str(pid), "--rate", str(SAMPLE_RATE_HZ), "--nonblocking",
               "--format", "raw", "--output", path]  # fmt: skip
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        gevent.sleep(ATTACH_S)
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file when interrupted
        try:
            _, err = spy.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            _, err = spy.communicate()
    if not Path(path).exists():
        raise BenchError(f"py-spy wrote no profile: {err.decode(errors='replace')[-1000:]}")


def summarize(path: str, most: int = 15) -> dict[str, Any]:
    """The functions with the most samples of their own, and the redflow
    functions with the most samples in all (their callees included), in %;
    by function (py-spy's frames name a line, which the raw file keeps)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            if "redflow/" in frame:
                inclusive[frame] += samples

    def shares(counter: Counter[str]) -> list[list[Any]]:
        return [[round(100.0 * n / max(1, total), 1), frame] for frame, n in counter.most_common(most)]

    return {"path": path, "samples": total, "self": shares(own), "inclusive_redflow": shares(inclusive)}


def render(profile: dict[str, Any]) -> str:
    lines = [f"profile of the worker during the drain: {profile['samples']} samples in {profile['path']}", "  own time:"]
    lines += [f"    {share:5.1f} %  {frame}" for share, frame in profile["self"]]
    lines.append("  redflow functions, callees included:")
    lines += [f"    {share:5.1f} %  {frame}" for share, frame in profile["inclusive_redflow"]]
    return "\n".join(lines)
