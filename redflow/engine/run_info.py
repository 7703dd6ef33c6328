"""The run an attempt executes, as its handler, steps and observers see it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from redflow.core.tags import NO_TAGS


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run an attempt executes (``tags``: the run's, which its child runs inherit;
    ``deadline_ms``: when its ``timeout`` ends it, in Redis epoch ms, or None)."""

    id: str
    workflow: str
    queue: str
    attempt: int
    max_attempts: int
    tags: Mapping[str, str] = field(default_factory=lambda: NO_TAGS)
    deadline_ms: int | None = None
