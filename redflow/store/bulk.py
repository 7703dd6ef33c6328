"""Retry or cancel every run a filter selects, in bounded batches.

The runs are found page by page (:class:`~redflow.store.run_search.RunSearch`,
ids only: a batch of :data:`BULK_BATCH` ids is all that is held besides the
ids already acted on), and each batch is one pipelined round trip of
scripts, so 100,000 runs neither block Redis nor fill memory. Each run is
acted on at most once per call: the walk goes newest first past what it has
done (a retried run that fails again re-enters the failed index at the top,
behind the walk), and the ids done are remembered besides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from redflow.core import codec
from redflow.core.errors import CanceledError, RedflowError
from redflow.store.run_search import RunFilter, RunSearch

BULK_BATCH = 500
RETRYABLE = ("failed", "canceled")
CANCELABLE = ("scheduled", "queued", "running")


def cancel_error_json(reason: str | None) -> str:
    """The ``errorJson`` of a run canceled by a client (no stack: nothing failed)."""
    return codec.dumps_error(CanceledError(f"Run canceled: {reason}" if reason else "Run canceled"), with_stack=False)


def _statuses(status: str | None, allowed: tuple[str, ...], action: str) -> tuple[str, ...]:
    if status is None:
        return allowed
    if status not in allowed:
        raise RedflowError(f"{action} takes runs that are {' or '.join(allowed)}, not {status!r}")
    return (status,)


def _each_batch(
    search: RunSearch, flt: RunFilter, statuses: Iterable[str], queues: Sequence[str | None]
) -> Iterable[list[tuple[str, str, list[str]]]]:
    """``(run id, queue, index keys)`` of the matching runs, a batch at a time, each run once."""
    done: set[str] = set()
    for status in statuses:
        for entries in search.iter_entries(dataclasses.replace(flt, status=status), queues, batch=BULK_BATCH):
            fresh = [e for e in entries if e.run_id not in done]
            done.update(e.run_id for e in fresh)
            batch = [(e.run_id, *target) for e, target in zip(fresh, search.targets(fresh)) if target is not None]
            if batch:
                yield batch


def retry_many(search: RunSearch, flt: RunFilter, queues: Sequence[str | None], clock_ms: Callable[[], int]) -> int:
    """Queue again every failed / canceled run ``flt`` selects; returns how many were."""
    scripts, retried = search.scripts, 0
    for batch in _each_batch(search, flt, _statuses(flt.status, RETRYABLE, "retry_many"), queues):
        pipe, now_ms = scripts.batch(), clock_ms()
        for run_id, queue, index_keys in batch:
            scripts.retry_run(run_id=run_id, queue=queue, now_ms=now_ms, index_keys=index_keys, conn=pipe)
        retried += sum(1 for reply in pipe.execute() if reply.accepted)
    return retried


def cancel_many(
    search: RunSearch,
    flt: RunFilter,
    queues: Sequence[str | None],
    clock_ms: Callable[[], int],
    reason: str | None = None,
    then: Callable[[list[str]], object] | None = None,
) -> int:
    """Cancel every unfinished run ``flt`` selects (a running one is stopped by
    its worker); finished runs are left alone. Returns how many were canceled
    or told to stop. ``then``: called with each batch's canceled or stopped
    runs once they are (the cancel of their children)."""
    scripts, canceled, error_json = search.scripts, 0, cancel_error_json(reason)
    for batch in _each_batch(search, flt, _statuses(flt.status, CANCELABLE, "cancel_many"), queues):
        pipe, now_ms = scripts.batch(), clock_ms()
        for run_id, queue, index_keys in batch:
            scripts.cancel_run(
                run_id=run_id, queue=queue, now_ms=now_ms, reason=reason or "", error_json=error_json, index_keys=index_keys, conn=pipe
            )
        stopped = [run_id for (run_id, _, _), reply in zip(batch, pipe.execute()) if reply in ("canceled", "requested")]
        canceled += len(stopped)
        if then is not None and stopped:
            then(stopped)
    return canceled
