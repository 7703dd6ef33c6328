"""Finding runs by workflow, status and tags, and acting on all of them: what
``runs list --tag``, ``runs retry|cancel --all`` and the dashboard's
filters and bulk buttons share, so that they select and say the same things.

The query itself is the client's (``list_runs``, ``count_matching``,
``retry_many``, ``cancel_many``: indexes, bounded pages, a cursor); this
module parses filters as people type them (``--tag customer=42``) and puts
bulk actions into words (the command-line options are :mod:`redflow.ops.cli.runs`'s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from redflow.client import RedflowClient
from redflow.core.errors import RedflowError
from redflow.core.tags import parse_tag
from redflow.store.bulk import CANCELABLE, RETRYABLE


@dataclass(frozen=True, slots=True)
class Filters:
    """A run selection: workflow, status and tags, every given part must hold."""

    workflow: str | None = None
    status: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [f"workflow={self.workflow}"] if self.workflow else []
        parts += [f"status={self.status}"] if self.status else []
        parts += [f"{k}={v}" for k, v in self.tags.items()]
        return " ".join(parts) or "all runs"


def parse_tags(texts: Iterable[str] | None) -> dict[str, str]:
    """``["customer=42", "tenant=acme"]`` -> a tag filter; a key given twice is an error."""
    tags: dict[str, str] = {}
    for text in texts or ():
        key, value = parse_tag(text)
        if key in tags and tags[key] != value:
            raise RedflowError(f"tag {key!r} is given twice ({tags[key]!r} and {value!r}); a run has one value per tag")
        tags[key] = value
    return tags


def statuses_for(action: str, status: str | None) -> tuple[str, ...]:
    """The statuses a bulk ``action`` walks: the one given, or all it can act on."""
    allowed = RETRYABLE if action == "retry" else CANCELABLE
    if status is not None and status not in allowed:
        raise RedflowError(f"{action} --all acts on runs that are {' or '.join(allowed)}, not {status}")
    return (status,) if status else allowed


def count_for(client: RedflowClient, action: str, filters: Filters) -> int:
    """How many runs a bulk ``action`` would act on now (``--dry-run``)."""
    return sum(client.count_matching(filters.workflow, s, tags=filters.tags) for s in statuses_for(action, filters.status))


def apply(client: RedflowClient, action: str, filters: Filters, reason: str | None = None) -> int:
    """Run the bulk ``action``; returns how many runs it retried or canceled."""
    statuses_for(action, filters.status)  # a clear refusal before anything is done
    if action == "retry":
        return client.retry_many(workflow=filters.workflow, status=filters.status, tags=filters.tags)
    return client.cancel_many(workflow=filters.workflow, status=filters.status, tags=filters.tags, reason=reason)


def summary(action: str, filters: Filters, count: int, *, dry_run: bool = False) -> str:
    verb = {"retry": "retried", "cancel": "canceled or told to stop"}[action]
    if dry_run:
        return f"{count} run(s) would be {verb.split(' ')[0]} ({filters.describe()})"
    return f"{count} run(s) {verb} ({filters.describe()})"
