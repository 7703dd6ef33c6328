"""Per-workflow figures over a window: ``redflow-gevent stats`` and the dashboard's Workflows page.

For each workflow, the runs *created* in the window (its ``workflow-runs``
index, by createdAt) are counted, and the newest of them (at most
``max_runs``, 5,000 by default) are read: their counts by status, the
success rate (succeeded / (succeeded + failed); canceled runs count in
neither), the p50 and p95 run duration (finishedAt - startedAt of the
finished runs that started, nearest-rank: always a duration some run took)
the error of the run that failed last, and how many of the failed runs a
deadline failed (``expired``: ``start_within`` or ``timeout``), and how many ``client.run``
calls a singleton skipped into them (``skipped``) or a debounce collapsed into them
(``collapsed``). When the window holds more runs than are read, the figures say so
(``sampled < runs``). :func:`one_run_calls`: those calls since the prefix began (metrics).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.keys import RUN_STATUSES, TERMINAL_STATUSES
from redflow.core.models import RunField, int_field
from redflow.core.tally import nearest_rank
from redflow.ops.views.queues import index_queues, workflow_names

#: The windows the dashboard offers; the command takes any ``<n>s|m|h|d``.
WINDOWS = {"1h": 3600, "24h": 86400, "7d": 7 * 86400}
DEFAULT_WINDOW = "24h"
DEFAULT_MAX_RUNS = 5000
MAX_WINDOW_S = 366 * 86400
_WINDOW = re.compile(r"(\d{1,6})([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_FIELDS = (RunField.STATUS, RunField.CREATED_AT, RunField.STARTED_AT, RunField.FINISHED_AT, RunField.DEADLINE_EXCEEDED,
           RunField.SKIPPED_CALLS, RunField.COLLAPSED_CALLS)  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowStats:
    """One workflow's figures over a window; see the module docstring for each."""

    workflow: str
    runs: int  # created in the window
    sampled: int  # the newest runs the figures come from
    counts: dict[str, int]
    success_rate: float | None
    p50_s: float | None
    p95_s: float | None
    latest_error: dict[str, Any] | None
    latest_error_run: str | None
    #: failed runs a deadline failed (start_within, timeout)
    expired: int = 0
    #: client.run calls a singleton skipped into these runs, or a debounce collapsed into them
    skipped: int = 0
    collapsed: int = 0

    @property
    def partial(self) -> bool:
        """The window holds more runs than the figures were computed from."""
        return self.sampled < self.runs


def parse_window(text: str) -> int:
    """``"90s"``, ``"30m"``, ``"1h"``, ``"24h"``, ``"7d"`` -> seconds; a clear error otherwise."""
    match = _WINDOW.fullmatch(text.strip()) if isinstance(text, str) else None
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)] if match else 0
    if not 0 < seconds <= MAX_WINDOW_S:
        raise RedflowError(f"a window is a whole number of s, m, h or d up to 366d (30m, 1h, 24h, 7d), not {text!r}")
    return seconds


def workflow_stats(
    client: RedflowClient, window_s: int, *, max_runs: int = DEFAULT_MAX_RUNS, workflows: list[str] | None = None
) -> list[WorkflowStats]:
    """The figures of ``workflows`` (default: every synced one) over the last ``window_s`` seconds."""
    if max_runs < 1:
        raise RedflowError("max_runs must be >= 1")
    names = workflows if workflows is not None else workflow_names(client)
    since_ms = client.now_ms() - window_s * 1000
    newest = _newest_runs(client, names, since_ms, max_runs)
    fields = _read_fields(client, [run for _, runs in newest.values() for run in runs])
    stats = [_figures(name, total, [fields[run_id] for _, run_id, _ in runs if run_id in fields]) for name, (total, runs) in newest.items()]
    return _with_errors(client, stats, {run_id: queue for _, runs in newest.values() for _, run_id, queue in runs})


def _newest_runs(
    client: RedflowClient, names: list[str], since_ms: int, max_runs: int
) -> dict[str, tuple[int, list[tuple[float, str, str | None]]]]:
    """Per workflow: how many runs were created since ``since_ms``, and the newest ``max_runs`` of them."""
    queues = index_queues(client)
    pipe = client.redis.pipeline(transaction=False)
    for name in names:
        for queue in queues:
            index = client.keys.workflow_runs(name, queue)
            pipe.zcount(index, since_ms, "+inf")
            pipe.zrevrangebyscore(index, "+inf", since_ms, start=0, num=max_runs, withscores=True)
    replies = iter(pipe.execute())
    newest = {}
    for name in names:
        total, runs = 0, []
        for queue in queues:
            total += next(replies)
            runs += [(score, run_id, queue) for run_id, score in next(replies)]
        newest[name] = (total, sorted(runs, reverse=True)[:max_runs])
    return newest


def _read_fields(client: RedflowClient, runs: list[tuple[float, str, str | None]]) -> dict[str, dict[str, str]]:
    """Status and times of each run (runs whose hash is gone are left out)."""
    pipe = client.redis.pipeline(transaction=False)
    for _, run_id, queue in runs:
        pipe.hmget(client.keys.run(run_id, queue), _FIELDS)
    read = {}
    for (_, run_id, _), values in zip(runs, pipe.execute()):
        if values[0] is not None:
            read[run_id] = {**{f: v for f, v in zip(_FIELDS, values) if v is not None}, "id": run_id}
    return read


def _figures(name: str, total: int, runs: list[dict[str, str]]) -> WorkflowStats:
    counts = dict.fromkeys(RUN_STATUSES, 0)
    durations_ms: list[int] = []
    latest_failed: tuple[int, str] | None = None
    expired = skipped = collapsed = 0
    for run in runs:
        status = run[RunField.STATUS]
        counts[status] = counts.get(status, 0) + 1
        expired += status == "failed" and bool(run.get(RunField.DEADLINE_EXCEEDED))
        skipped += _ms(run, RunField.SKIPPED_CALLS) or 0
        collapsed += _ms(run, RunField.COLLAPSED_CALLS) or 0
        started, finished = _ms(run, RunField.STARTED_AT), _ms(run, RunField.FINISHED_AT)
        if status in TERMINAL_STATUSES and started and finished:
            durations_ms.append(max(0, finished - started))
        if status == "failed" and (latest_failed is None or (finished or 0) > latest_failed[0]):
            latest_failed = (finished or 0, run["id"])
    ended = counts["succeeded"] + counts["failed"]
    p50, p95 = nearest_rank(durations_ms, 50), nearest_rank(durations_ms, 95)
    return WorkflowStats(
        workflow=name, runs=max(total, len(runs)), sampled=len(runs), counts=counts,
        success_rate=counts["succeeded"] / ended if ended else None,
        p50_s=None if p50 is None else p50 / 1000.0, p95_s=None if p95 is None else p95 / 1000.0,
        latest_error=None, latest_error_run=latest_failed[1] if latest_failed else None, expired=expired,
        skipped=skipped, collapsed=collapsed,
    )  # fmt: skip


def _ms(run: dict[str, str], name: str) -> int | None:
    """A time (or count) field of a run; one that does not parse counts as missing (one bad run must not hide the figures)."""
    try:
        return int_field(run, name, what=f"run {run['id']}")
    except CorruptDataError:
        return None


def _with_errors(client: RedflowClient, stats: list[WorkflowStats], queues: dict[str, str | None]) -> list[WorkflowStats]:
    """Read the error of each workflow's latest failed run (one round trip for all)."""
    failed = [s for s in stats if s.latest_error_run]
    if not failed:
        return stats
    pipe = client.redis.pipeline(transaction=False)
    for s in failed:
        pipe.hget(client.keys.run(s.latest_error_run or "", queues.get(s.latest_error_run or "")), RunField.ERROR_JSON)
    errors = {}
    for s, raw in zip(failed, pipe.execute()):
        error = codec.try_loads(raw) if raw else None
        errors[s.workflow] = error if isinstance(error, dict) else {"message": str(raw or "")[:200]}
    return [dataclasses.replace(s, latest_error=errors.get(s.workflow)) for s in stats]


def one_run_calls(client: RedflowClient) -> dict[tuple[str, str], int]:
    """``{(workflow, "skipped" | "collapsed"): calls}``: every ``client.run`` call a singleton
    skipped or a debounce collapsed since the prefix began (``Keys.one_run_calls``, one hash per queue)."""
    pipe = client.redis.pipeline(transaction=False)
    for queue in index_queues(client):
        pipe.hgetall(client.keys.one_run_calls(queue))
    calls: dict[tuple[str, str], int] = {}
    for counts in pipe.execute():
        for field, raw in counts.items():
            workflow, _, kind = field.rpartition(":")
            if kind in ("skipped", "collapsed") and str(raw).isdigit():
                calls[(workflow, kind)] = calls.get((workflow, kind), 0) + int(raw)
    return calls
