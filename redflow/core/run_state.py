"""What a waiter reads of a run: its status and outcome (one HMGET)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redflow.core import codec
from redflow.core.errors import CanceledError, RedflowError, RunFailedError
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

    @classmethod
    def from_reply(cls, run_id: str, reply: Sequence[str | None]) -> RunState | None:
        """The state of the :data:`STATE_FIELDS` values read of a run; None when it has no status (no such run)."""
        status, output_json, error_json, cancel_reason, queue = reply
        if status is None:
            return None
        return cls(run_id, status, queue or "default", output_json, error_json, cancel_reason or None)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def outcome(self) -> Any:
        """The output of a finished run, or the error its end means."""
        if self.status == "succeeded":
            return codec.loads(self.output_json, what=f"run {self.run_id} outputJson") if self.output_json else None
        if self.status == "failed":
            error = codec.try_loads(self.error_json)
            raise RunFailedError(self.run_id, error if isinstance(error, dict) else None)
        if self.status == "canceled":
            raise CanceledError(f"Run canceled: {self.cancel_reason}" if self.cancel_reason else "Run canceled")
        raise RedflowError(f"run {self.run_id} has not finished (status {self.status!r})")
