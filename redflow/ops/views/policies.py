"""A run's retry policy, deadlines, singleton or debounce as operators see them: ``redflow-gevent
runs show`` and the dashboard's run page, so that both say the same thing.

The attempts, the next retry time and the deadlines come with the run (its
hash); the policy's waits from the workflow's metadata, where sync stores a
policy other than the default (``retryJson``), so that a process without
the workflows' code can show them. One HGET per run shown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.models import Run, WorkflowField
from redflow.core.retry import RETRY_BASE_MS, RETRY_CAP_MS, RETRY_JITTER_MS
from redflow.core.singleton import policy_fact
from redflow.ops.format import fmt_seconds, fmt_time

#: What a run of a workflow that syncs no ``retryJson`` retries by (DATA_MODEL.md's backoff).
DEFAULT_POLICY_TEXT = (
    f"default: {fmt_seconds(RETRY_BASE_MS / 1000)} doubling up to {fmt_seconds(RETRY_CAP_MS / 1000)}, +0-{RETRY_JITTER_MS - 1}ms"
)


@dataclasses.dataclass(frozen=True, slots=True)
class RunPolicy:
    """``attempts`` used / allowed; ``policy``: the waits between them in words;
    ``next_retry_at`` while a retry is scheduled; the deadlines (unix seconds)
    and ``expired``: the one that failed the run, if one did."""

    attempts: str
    policy: str
    next_retry_at: float | None
    start_by: float | None
    deadline_at: float | None
    expired: str | None
    #: its singleton or debounce, as (name, words), and the calls skipped or collapsed into it
    one_run: tuple[str, str] | None = None


def describe_policy(summary: Mapping[str, Any] | None) -> str:
    """A synced ``retryJson`` in words: ``1s x2 up to 1h, jitter 20%, no retry on ValueError``."""
    if not summary:
        return DEFAULT_POLICY_TEXT
    initial_s, longest_s = (summary.get("initialDelayMs") or 0) / 1000, (summary.get("maxDelayMs") or 0) / 1000
    parts = [f"{fmt_seconds(initial_s)} x{summary.get('factor', 1):g} up to {fmt_seconds(longest_s)}"]
    if summary.get("jitter"):
        parts.append(f"jitter {summary['jitter'] * 100:g}%")
    if summary.get("retryOn"):
        parts.append(f"only {', '.join(map(str, summary['retryOn']))}")
    if summary.get("noRetryOn"):
        parts.append(f"no retry on {', '.join(map(str, summary['noRetryOn']))}")
    return ", ".join(parts)


def run_policy(client: RedflowClient, run: Run) -> RunPolicy:
    """The policy and deadlines of ``run`` (one read of its workflow's ``retryJson``)."""
    raw = client.redis.hget(client.keys.workflow(run.workflow), WorkflowField.RETRY_JSON)
    summary = codec.try_loads(raw)
    return RunPolicy(
        attempts=f"{run.attempt}/{run.max_attempts}",
        policy=describe_policy(summary if isinstance(summary, dict) else None),
        next_retry_at=run.next_retry_at,
        start_by=run.start_by,
        deadline_at=run.deadline_at,
        expired=run.deadline_exceeded,
        one_run=policy_fact(run.singleton, run.debounce, run.skipped_calls, run.collapsed_calls),
    )


def policy_facts(policy: RunPolicy, status: str) -> list[tuple[str, str]]:
    """The policy as (name, text) lines: retries, the next one while scheduled, the deadlines."""
    facts = [("retries", policy.policy)]
    if policy.next_retry_at is not None:
        facts.append(("next try", fmt_time(policy.next_retry_at)))
    if policy.start_by is not None or policy.deadline_at is not None:
        facts.append(("deadline", describe_deadlines(policy, status)))
    if policy.one_run is not None:
        facts.append(policy.one_run)
    return facts


def describe_deadlines(policy: RunPolicy, status: str) -> str:
    """``start by <t>; end by <t>`` and, for a run a deadline failed, which one."""
    parts = []
    if policy.start_by is not None:
        parts.append(f"start by {fmt_time(policy.start_by)}")
    if policy.deadline_at is not None:
        parts.append(f"end by {fmt_time(policy.deadline_at)}")
    text = "; ".join(parts)
    if policy.expired and status == "failed":
        text += f" (exceeded: {'not started in time' if policy.expired == 'start' else 'timed out'})"
    return text
