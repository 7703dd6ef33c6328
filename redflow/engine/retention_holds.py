"""Children the retention cleaner reached while their parent was unfinished.

A child of ``step.run_workflows`` / ``step.run_workflow`` is not deleted
while its parent is unfinished (store/purge.py says why). The lanes of the
cleaner (engine/retention.py) walk on past such a child, so it is noted in
``P:retention:held`` (per the child's queue on a cluster), scored by when
to look at it again. Each pass reads the entries due for a look: a child
whose parent has ended or is gone is deleted now (its own retention passed
before it was held); one still held is looked at again later, backing off
from 1 s to 5 min as it waits (so it goes at most about 5 min after its
parent ended); one that is live again (retried) or kept longer now leaves
the set, its own lane finds it again. Deleting a run removes its entry
(``purge_run.lua`` counts the set among the run's indexes), so the set
never names a run that is gone for long. Runs without a parent never come
here: the set is empty and a pass reads one empty range per queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from redflow.core.retention import Retention
from redflow.store.purge import Seen, purge_runs, read_runs
from redflow.store.scripts import Scripts

RECHECK_MIN_MS = 1_000
RECHECK_MAX_MS = 300_000


def hold(redis: Any, scripts: Scripts, runs: Iterable[Seen], now_ms: int) -> None:
    """Note ``runs`` (children kept for their parent) for a look in a second;
    one already noted keeps its time."""
    pipe = redis.pipeline(transaction=False)
    for run in runs:
        pipe.zadd(scripts.keys.retention_held(run.queue), {run.run_id: now_ms + RECHECK_MIN_MS}, nx=True)
    if len(pipe):
        pipe.execute()


def release_pass(
    scripts: Scripts, redis: Any, queues: Sequence[str | None], retention_of: Callable[[str], Retention], now_ms: int, page: int
) -> tuple[int, bool]:
    """Look at up to ``page`` held children a queue that are due for a look;
    returns how many were deleted and whether a queue had more due."""
    keys = scripts.keys
    pipe = redis.pipeline(transaction=False)
    for queue in queues:
        pipe.zrangebyscore(keys.retention_held(queue), "-inf", now_ms, 0, page)
    pages = pipe.execute()
    runs = read_runs(redis, keys, [(queue, run_id) for queue, ids in zip(queues, pages) for run_id in ids])
    if not runs:
        return 0, False
    outcome = purge_runs(scripts, redis, [run for run in runs if run.status is None or _outlived(run, retention_of, now_ms)])
    held = {run.run_id for run in outcome.held}
    pipe = redis.pipeline(transaction=False)
    for run in runs:
        if run.run_id in held:
            pipe.zadd(keys.retention_held(run.queue), {run.run_id: now_ms + _recheck_ms(run, now_ms)})
        elif run.run_id not in outcome.removed:  # live again, kept longer now, or changed: its own lane has it
            pipe.zrem(keys.retention_held(run.queue), run.run_id)
    if len(pipe):
        pipe.execute()
    return outcome.count, any(len(ids) >= page for ids in pages)


def _outlived(run: Seen, retention_of: Callable[[str], Retention], now_ms: int) -> bool:
    """Whether a finished run's own retention has passed."""
    finished = run.finished_ms  # None unless terminal
    if finished is None or run.status is None:
        return False
    keep_ms = retention_of(run.workflow).keep_ms(run.status)
    return keep_ms is not None and finished + keep_ms <= now_ms


def _recheck_ms(run: Seen, now_ms: int) -> int:
    """How long until the next look: as long as the child has waited already, within bounds."""
    return min(RECHECK_MAX_MS, max(RECHECK_MIN_MS, now_ms - (run.finished_ms or now_ms)))
