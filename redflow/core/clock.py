"""Time in integer epoch milliseconds, the unit of every time stored in Redis.

Call ``clock.now_ms()`` through the module so tests can replace it.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def ms_to_s(ms: int | None) -> float | None:
    """Stored ms -> the float unix seconds of the Python API."""
    return None if ms is None else ms / 1000.0


def s_to_ms(seconds: float) -> int:
    return int(round(seconds * 1000))
