"""One worker at a time: a leader lock for background jobs that must not run
twice at once across workers (the retention cleaner).

The lock is a token under a key with PX; the holder renews it at every pass
(a script that renews only its own token) and releases it when it stops. A
holder that dies loses it within ``lock_ms``, and another worker takes over.
"""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError

from redflow.core.keys import new_id
from redflow.store.scripts import Scripts

log = logging.getLogger("redflow.leader")


class LeaderLock:
    """``hold()`` at each pass: whether this worker is the leader now."""

    def __init__(self, scripts: Scripts, redis: Any, key: str, *, lock_ms: int) -> None:
        self._scripts = scripts
        self._redis = redis
        self.key = key
        self.lock_ms = lock_ms
        self.token = new_id("lock")
        self.held = False

    def hold(self) -> bool:
        """Take the lock if it is free, renew it if it is ours."""
        if self.held:
            self.held = self._scripts.renew_lock(key=self.key, token=self.token, lock_ms=self.lock_ms)
        else:
            self.held = bool(self._redis.set(self.key, self.token, nx=True, px=self.lock_ms))
        return self.held

    def release(self) -> None:
        """Give the lock up at once (worker stopping), so another worker takes over."""
        if not self.held:
            return
        self.held = False
        try:
            self._scripts.release_lock(key=self.key, token=self.token)
        except RedisError as exc:  # it expires within lock_ms anyway
            log.info("could not release %s (%s)", self.key, exc)
