"""``ctx.stream``: a handler appends JSON items to its run's output stream.

Each call is one script call (``append_stream.lua``: a fence check, one
``XADD``, the run's stream fields), from any greenlet of the handler; a run
that never streams costs nothing. Items are numbered within an attempt by
position (the handler's n-th call): when a run parked in a durable wait
resumes, its handler runs again from the top and streams again what it
streamed before the park; those positions were written already and are
skipped (the first call learns how far the attempt had got, the others are
skipped without Redis). A retry is a new attempt: it streams everything
again, its items carrying its own number, and the earlier attempts' items
stay. The positions and the skipping are :class:`~redflow.core.streams.StreamWriter`'s,
which the inline test runner gives its handlers too, over a list
(``redflow/testing/inline_stream.py``); this module is its worker side.
"""

from __future__ import annotations

import logging
from typing import Protocol

from redis.exceptions import OutOfMemoryError, RedisError

from redflow.core.errors import RedflowError, RedisFullError
from redflow.core.streams import MAX_ITEMS, StreamWriter
from redflow.engine.fence import Fence
from redflow.engine.interrupts import CANCELED, LEASE_LOST, REDIS_LOST, RunInterrupt
from redflow.engine.run_info import RunInfo

log = logging.getLogger("redflow.attempt")


class StreamHost(Protocol):
    """What a worker's attempt gives its stream writer (``engine/attempt.py``)."""

    @property
    def info(self) -> RunInfo: ...
    @property
    def fence(self) -> Fence: ...
    def now_ms(self) -> int: ...


def streamer(host: StreamHost) -> StreamWriter:
    """The ``ctx.stream`` of a worker's attempt: items written through its fence's store,
    fenced by its lease token (its fence is made at the first item)."""

    def append(attempt: int, position: int, record: str) -> int:
        return _append(host.fence, attempt, position, record, host.now_ms())

    return StreamWriter(append, host.info.attempt, host.now_ms)


def _append(fence: Fence, attempt: int, position: int, record: str, now_ms: int) -> int:
    """One item through ``append_stream.lua``. An attempt that does not own its run any
    more stops there, as at a step; Redis failing is the engine's trouble (the attempt
    is left to be recovered), but a full Redis is the handler's (:class:`RedisFullError`)."""
    lease, store = fence.lease, fence.store
    try:
        reply = store.scripts.append_stream(
            run_id=lease.run_id, queue=lease.queue, token=lease.token, attempt=attempt, position=position, record=record,
            now_ms=now_ms, max_items=MAX_ITEMS,
        )  # fmt: skip
    except OutOfMemoryError as exc:
        raise RedisFullError("the stream item was not written") from exc
    except RedisError as exc:
        log.warning("run %s: could not write a stream item (%s); leaving it to be recovered", lease.run_id, exc, extra=lease.log_extra())
        lease.stop(REDIS_LOST)
        raise RunInterrupt(REDIS_LOST) from exc
    if reply.kind == "refused":
        if reply.status in ("succeeded", "failed"):  # a greenlet the handler left behind, after its run ended
            raise RedflowError(f"run {lease.run_id} has ended ({reply.status}): its stream takes no more items")
        if reply.status == "canceled":
            lease.stop(CANCELED)
        else:
            fence.keeper.report_lost(lease, f"its stream item was refused (the run is {reply.status or 'gone'}, or another attempt has it)")
        raise RunInterrupt(lease.stopped or LEASE_LOST)
    return reply.replayed
