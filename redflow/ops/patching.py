"""gevent's monkey patching, as the processes redflow starts do it first thing:
the ``redflow-gevent`` command and ``python -m redflow.contrib.django.patched``.

``gevent.monkey.patch_all()`` asks ``importlib.metadata`` for its plugins' entry
points 25 times (before and after each module it patches), and each ask reads
the metadata of every installed distribution: with ~90 packages installed that
is about 50 ms of CPU of every worker process started (a supervisor's children,
a deploy's, a test suite's). The 25 asks name 5 groups: while ``patch_all``
runs, the first answer for a group serves the asks after it. What is patched,
and which plugins are called, is unchanged.

Nothing is imported here but gevent and the standard library: ``redis`` and
``ssl`` must come after the patching.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from gevent import monkey


def patch_all() -> None:
    """``gevent.monkey.patch_all()``, reading each group of plugin entry points once."""
    read = metadata.entry_points
    answers: dict[tuple[tuple[str, Any], ...], Any] = {}

    def entry_points(**selection: Any) -> Any:
        key = tuple(sorted(selection.items()))
        if key not in answers:
            answers[key] = read(**selection)
        return answers[key]

    metadata.entry_points = entry_points
    try:
        monkey.patch_all()
    finally:
        metadata.entry_points = read
