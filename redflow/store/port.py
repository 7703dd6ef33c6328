"""The store: one Redis under one prefix, as everything above the store layer reaches it.

A :class:`Store` is a value: the connection, the keys, the script wrappers,
Redis's clock, the run locator, the payload codec and the run search, built
once and shared, with the interop settings (``core/interop.py``: an app name
scoping queues, payloads by reference, step records as arrays) of everything
that works through it. The client is built over one and so is every background
role of a worker (promoter, reaper, sweepers, retention, heartbeat,
scheduled events, cron) and every attempt: the engine reaches Redis through
this port, not through the user-facing client. Handlers get a client built
over the worker's store (``ctx.client``), so both see the same connection
pool, clock and location cache.
"""

from __future__ import annotations

from typing import Any

from redflow.core.interop import NONE, Interop
from redflow.core.keys import Keys
from redflow.store.batch import Batch
from redflow.store.connection import is_cluster
from redflow.store.locator import RunLocator
from redflow.store.payloads import Payloads
from redflow.store.run_search import RunSearch
from redflow.store.scripts import Scripts
from redflow.store.server_clock import ServerClock


class Store:
    """Redis, keys, scripts, clock, locator, payloads and search of one prefix."""

    __slots__ = ("redis", "prefix", "keys", "scripts", "clock", "locator", "payloads", "search", "interop")

    def __init__(self, redis: Any, prefix: str, *, interop: Interop = NONE) -> None:
        self.redis = redis
        self.interop = interop
        self.prefix = prefix
        self.keys = Keys(prefix, cluster=is_cluster(redis))
        self.scripts = Scripts(redis, self.keys)
        self.clock = ServerClock(redis)
        self.locator = RunLocator(redis, self.keys)
        self.payloads = Payloads(interop.blob_threshold_bytes)
        self.search = RunSearch(redis, self.keys, self.scripts)

    def __repr__(self) -> str:
        return f"Store(prefix={self.prefix!r})"

    def now_ms(self) -> int:
        """Redis's time in epoch ms: the clock every stored time and due time is read from."""
        return self.clock.now_ms()

    def batch(self) -> Batch:
        """Commands and scripts to send together (see :class:`Batch`)."""
        return Batch(self.redis)

    def pipeline(self) -> Any:
        """A plain pipeline (no transaction) for commands only."""
        return self.redis.pipeline(transaction=False)

    def load_scripts_for_batches(self) -> None:
        """Before a batch of scripts on a cluster: a cluster pipeline does not load them by itself."""
        if self.keys.cluster:
            self.scripts.load_all()
