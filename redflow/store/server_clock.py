"""Redis's clock, the one clock every "is it due?" decision uses.

Workers and clients on many machines decide when a delayed run, a retry or
a cron tick is due, and when a lease has lapsed. If each used its own wall
clock, a worker one hour fast would promote delayed runs an hour early and,
as cron leader, store next fire times an hour ahead (so a correct leader
taking over skips ticks). So every time redflow stores or compares is read
from Redis (``TIME``) and carried forward on the local *monotonic* clock,
which a wall-clock step or skew does not move. Re-read every
``resync_s`` seconds: a round trip per half minute, none per run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.exceptions import RedisError

log = logging.getLogger("redflow.server_clock")

RESYNC_S = 30.0
#: A reading whose round trip took longer (a connection opened on the way) is taken again.
SLOW_READ_S = 0.002


class ServerClock:
    """``now_ms()``: Redis's time in integer epoch ms, without a round trip per call."""

    __slots__ = ("_redis", "resync_s", "_base_ms", "_base_mono", "_synced")

    def __init__(self, redis: Any, *, resync_s: float = RESYNC_S) -> None:
        self._redis = redis
        self.resync_s = resync_s
        self._base_ms = 0.0
        self._base_mono = 0.0
        self._synced = False

    def now_ms(self) -> int:
        mono = time.monotonic()
        if not self._synced or mono - self._base_mono >= self.resync_s:
            self._sync()
            mono = time.monotonic()
        return int(self._base_ms + (mono - self._base_mono) * 1000.0)

    def offset_ms(self) -> float:
        """How far Redis's clock is ahead of this machine's wall clock (for logs and tests)."""
        return self.now_ms() - time.time() * 1000.0

    def _sync(self) -> None:
        for _ in range(2):  # a slow first reading (a cold connection) is taken again
            before = time.monotonic()
            try:
                reply = self._redis.time()
            except RedisError as exc:
                if not self._synced:
                    raise  # never read: nothing to carry forward, the caller's Redis call would fail too
                log.info("could not re-read Redis's clock (%s); carrying the last reading forward", exc)
                self._base_ms, self._base_mono = self._base_ms + (before - self._base_mono) * 1000.0, before
                return
            after = time.monotonic()
            if isinstance(reply, dict):  # a cluster client asks every node; any master's clock will do
                reply = next(iter(reply.values()))
            seconds, micros = reply
            # The reply was made before it arrived: dating it at its arrival keeps this clock
            # at or behind Redis's (by at most the round trip), so nothing is ever due early.
            self._base_ms = int(seconds) * 1000.0 + int(micros) / 1000.0
            self._base_mono = after
            self._synced = True
            if after - before <= SLOW_READ_S:
                return
