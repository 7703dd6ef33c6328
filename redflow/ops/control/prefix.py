"""Every key under one prefix, deleted: what a demo or a bench leaves on a
shared Redis when it is done (``scripts/demo``, ``redflow-gevent bench
--redis-url``). Nothing serves a throwaway prefix afterwards, so retention
would never delete its runs."""

from __future__ import annotations

import re
from typing import Any

from redflow.core.keys import Keys

#: Keys unlinked per round trip.
BATCH = 1000
_GLOB = re.compile(r"([\\*?\[\]])")


def delete_prefix(redis: Any, prefix: str) -> int:
    """UNLINK every key of ``prefix`` (``P:...``, as :class:`Keys` spells them);
    the number deleted. Keys of another prefix that starts alike are kept."""
    pattern = _GLOB.sub(r"\\\1", Keys(prefix).prefix) + ":*"
    deleted = 0
    batch: list[Any] = []
    for key in redis.scan_iter(match=pattern, count=BATCH):
        batch.append(key)
        if len(batch) >= BATCH:
            deleted += _unlink(redis, batch)
            batch = []
    return deleted + (_unlink(redis, batch) if batch else 0)


def _unlink(redis: Any, keys: list[Any]) -> int:
    """One pipelined UNLINK per key: keys of any hash slots (a cluster's too)."""
    pipe = redis.pipeline(transaction=False)
    for key in keys:
        pipe.unlink(key)
    return sum(pipe.execute())
