"""App names: how the asyncio ``redflow`` package (0.0.8 and later) scopes queue
names by an application name, so that apps sharing a Redis do not see each
other's queues. No I/O here: this module only spells names.
"""

from __future__ import annotations

from typing import Final

#: The app name the asyncio package reads for workflow metadata without one; it scopes nothing.
UNSCOPED_APP: Final = "unknown"


def scope_queue(app: str | None, queue: str | None) -> str:
    """The queue name a run of ``queue`` has in app ``app``, as the asyncio
    ``redflow`` package (0.0.8 and later) names it: ``<app>:<queue>``; the
    queue alone without an app (or with ``unknown``); unchanged when it already
    starts with ``<app>:``. Blank names are stripped, and a blank queue is ``default``."""
    queue = (queue or "").strip() or "default"
    app = (app or "").strip()
    if not app or app == UNSCOPED_APP or queue.startswith(f"{app}:"):
        return queue
    return f"{app}:{queue}"
