"""A worker started before its Redis is ready waits for it instead of exiting.

Containers come up together, Redis restarts and loads its data set, or it is
full and refuses writes: a worker started then used to exit with a
57-line traceback. Transient refusals (connection refused or reset,
timeouts, ``LOADING``, ``OOM``, a cluster or failover in progress) are
retried with backoff and one log line per try; a wrong password or any
other error is not transient and is raised at once, for the caller to
report in one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis.exceptions
from gevent.event import Event
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    ConnectionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from redflow.core.errors import RedflowError

log = logging.getLogger("redflow.worker")

BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0

T = TypeVar("T")

#: Errors that say "not yet": Redis may accept the same request a little later.
_TRANSIENT = (
    BusyLoadingError,  # LOADING: a restarted Redis reads its AOF / RDB
    OutOfMemoryError,  # OOM: maxmemory reached with the noeviction policy
    ReadOnlyError,  # a replica until the failover promotes it
    TryAgainError,
    ClusterDownError,  # also MASTERDOWN
    RedisTimeoutError,
    SlotNotCoveredError,  # a cluster still assigning its slots
)
#: Connection errors that will not go away by waiting: the credentials are wrong
#: (redis-py 6 added the external provider's error).
_CREDENTIALS: tuple[type[Exception], ...] = (AuthenticationError, AuthorizationError) + tuple(
    getattr(redis.exceptions, name) for name in ("ExternalAuthProviderError",) if hasattr(redis.exceptions, name)
)


def is_transient(exc: BaseException) -> bool:
    """Whether Redis may accept the same request a little later."""
    if isinstance(exc, _TRANSIENT):
        return True
    if isinstance(exc, _CREDENTIALS):
        return False
    if isinstance(exc, RedisClusterException):  # a cluster client's start: no node answered (yet)
        return "cannot be connected" in str(exc) and not isinstance(exc.__cause__, _CREDENTIALS)
    return isinstance(exc, ConnectionError)  # refused, reset, unknown host, max clients, no Sentinel master yet


def retry_until_ready(start: Callable[[], T], *, where: str, timeout_s: float | None = None, stop: Event | None = None) -> T | None:
    """``start()``, tried again with backoff (0.2 s doubling to 5 s) while
    Redis refuses it transiently, forever when ``timeout_s`` is None.

    ``where`` names the Redis in the log lines: pass a URL with its password
    hidden. Non-transient errors propagate at once; past ``timeout_s`` a
    :class:`RedflowError` says how long it waited and why. ``stop`` set while
    it waits (a SIGTERM before the worker started) ends the wait: None.
    """
    stop = stop if stop is not None else Event()
    began = time.monotonic()
    deadline = None if timeout_s is None else began + timeout_s
    delay_s, tries = BACKOFF_FIRST_S, 0
    while True:
        try:
            value = start()
        except (RedisError, RedisClusterException) as exc:
            if not is_transient(exc):
                raise
            tries += 1
            reason = f"{type(exc).__name__}: {exc}"
            if deadline is not None and time.monotonic() + delay_s > deadline:
                raise RedflowError(f"Redis at {where} is not ready after {timeout_s:g}s ({reason})") from exc
            log.warning("Redis at %s is not ready (%s); try %d failed, next in %.1fs", where, reason, tries, delay_s)
            if stop.wait(delay_s):
                return None
            delay_s = min(BACKOFF_MAX_S, delay_s * 2)
            continue
        if tries:
            log.info("Redis at %s is ready (waited %.1fs)", where, time.monotonic() - began)
        return value
