"""What a waiter reads of a run: its status and outcome (one HMGET; one more
for an outcome stored as a ``@blob:`` reference, core/blobs.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from redflow.core import codec
from redflow.core.blobs import blob_fields_of, resolve
from redflow.core.errors import CanceledError, CorruptDataError, RedflowError, RunFailedError
from redflow.core.keys import TERMINAL_STATUSES
from redflow.core.models import RunField

#: The run fields a :class:`RunState` is read from, in order.
STATE_FIELDS = (RunField.STATUS, RunField.OUTPUT_JSON, RunField.ERROR_JSON, RunField.CANCEL_REASON, RunField.QUEUE)


@dataclass(frozen=True, slots=True)
class RunState:
    """The fields a waiter needs: status and outcome (one HMGET)."""

    run_id: str
    status: str
    queue: str
    output_json: str | None
    error_json: str | None
    cancel_reason: str | None
    #: The run's blob hash fields its output or error refers to (read by whoever read the state).
    blobs: Mapping[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, run_id: str, reply: Sequence[str | None]) -> RunState | None:
        """The state of the :data:`STATE_FIELDS` values read of a run; None when it has no status (no such run)."""
        status, output_json, error_json, cancel_reason, queue = reply
        if status is None:
            return None
        return cls(run_id, status, queue or "default", output_json, error_json, cancel_reason or None)

    def blob_fields(self) -> list[str]:
        """The blob hash fields a finished run's outcome refers to (none, mostly): to read before :meth:`outcome`."""
        return blob_fields_of((self.output_json, self.error_json)) if self.is_terminal else []

    def _text(self, stored: str, name: str) -> str:
        return resolve(stored, self.blobs, run_id=self.run_id, field=name)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def outcome(self) -> Any:
        """The output of a finished run, or the error its end means."""
        if self.status == "succeeded":
            if not self.output_json:
                return None
            return codec.loads(self._text(self.output_json, "outputJson"), what=f"run {self.run_id} outputJson")
        if self.status == "failed":
            try:
                error = codec.try_loads(self._text(self.error_json, "errorJson")) if self.error_json else None
            except CorruptDataError as exc:  # a blob missing or corrupt: the run failed, with an error that says so
                error = {"name": type(exc).__name__, "message": str(exc)}
            raise RunFailedError(self.run_id, error if isinstance(error, dict) else None)
        if self.status == "canceled":
            raise CanceledError(f"Run canceled: {self.cancel_reason}" if self.cancel_reason else "Run canceled")
        raise RedflowError(f"run {self.run_id} has not finished (status {self.status!r})")
