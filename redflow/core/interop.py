"""How a client or a worker shares one Redis with the asyncio ``redflow`` package (0.1.x).

Three settings, all off by default (the layout then is DATA_MODEL.md's, which
the TypeScript 0.0.1 client and the asyncio 0.0.1 read whole):

- ``app``: the app name that scopes queue names as 0.1.x does
  (:func:`~redflow.core.app_scope.scope_queue`: ``shop`` + ``default`` ->
  ``shop:default``), for the queues a client enqueues to and a worker polls,
  and in the workflow metadata a worker syncs;
- ``blob_threshold_bytes``: payloads of more UTF-8 bytes than this are
  written as ``@blob:`` references (core/blobs.py; they are read always);
- ``compat="redflow-0.1"``: the three things that let a 0.1.x worker or client
  take part in runs of ours: step records written as arrays (its worker
  refuses objects), a blob threshold of 1,024 bytes (its own) unless one is
  given, and the ``parentRunId`` field on every run (its client waits on a
  run's terminal stream, which the scripts that end a run write for runs
  with that field). An app name alone marks runs that way too: a client
  that names an app shares its queues with 0.1.x clients.

docs/interop.md has the layout and the table of what works in which direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from redflow.core.app_scope import scope_queue
from redflow.core.blobs import DEFAULT_THRESHOLD_BYTES, check_threshold
from redflow.core.errors import RedflowError

#: The compat mode for the asyncio ``redflow`` 0.1.x (0.0.25 and later).
COMPAT_REDFLOW_01: Final = "redflow-0.1"
COMPAT_MODES: Final = (COMPAT_REDFLOW_01,)


@dataclass(frozen=True, slots=True)
class Interop:
    """The interop settings of one client (and the worker over it); see the module docstring."""

    app: str | None = None
    blob_threshold_bytes: int | None = None
    compat: str | None = None

    @property
    def array_steps(self) -> bool:
        """Whether step records are written as the asyncio package's arrays."""
        return self.compat == COMPAT_REDFLOW_01

    @property
    def mark_parent(self) -> bool:
        """Whether runs get ``parentRunId`` (so that their end goes to their terminal stream)."""
        return self.compat is not None or self.app is not None

    def queue(self, queue: str) -> str:
        """``queue`` scoped by the app name (itself without one)."""
        return scope_queue(self.app, queue) if self.app is not None else queue


def interop(app: str | None = None, blob_threshold: int | None = None, compat: str | None = None) -> Interop:
    """Checked settings: an app name is a non-blank string (stripped, as 0.1.x
    strips it); ``compat`` is ``"redflow-0.1"`` or None; ``blob_threshold`` a
    number of bytes >= 0 (with compat and none given: 1,024)."""
    if app is not None and (not isinstance(app, str) or not app.strip()):
        raise RedflowError(f"app must be a non-empty name (or None), not {app!r}")
    if compat is not None and compat not in COMPAT_MODES:
        raise RedflowError(f"compat must be one of {', '.join(map(repr, COMPAT_MODES))} (or None), not {compat!r}")
    threshold = check_threshold(blob_threshold)
    if threshold is None and compat is not None:
        threshold = DEFAULT_THRESHOLD_BYTES
    return Interop(app.strip() if app is not None else None, threshold, compat)


#: No interop setting: the layout of the data model.
NONE = Interop()
