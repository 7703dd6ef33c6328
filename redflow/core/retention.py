"""How long finished runs stay in Redis (``define_workflow(retention=...)``).

Every peer bounds history (Celery ``result_expires``, RQ ``result_ttl``,
BullMQ ``removeOnComplete``); without a bound a busy Redis fills in hours.
A :class:`Retention` says, per terminal status, how long a finished run (its
hash, steps and index entries) is kept, and optionally how many finished
runs of the workflow are kept at most. No I/O here: the worker's retention
cleaner (``engine/retention.py``) applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from redflow.core.errors import RedflowError
from redflow.core.keys import RUN_STATUSES, TERMINAL_STATUSES

DAY_S = 86_400.0
#: The terminal statuses in :data:`RUN_STATUSES` order.
FINISHED_STATUSES = tuple(status for status in RUN_STATUSES if status in TERMINAL_STATUSES)

#: A number of seconds or a timedelta; None keeps forever.
Duration = float | int | timedelta | None


def duration_s(value: Duration, what: str, *, zero_ok: bool = False) -> float | None:
    """``value`` as finite seconds, > 0 (>= 0 with ``zero_ok``); None stays None;
    a clear error naming ``what`` otherwise."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RedflowError(f"{what} must be a number of seconds or a timedelta, not {type(value).__name__}")
    if not (math.isfinite(value) and (value >= 0 if zero_ok else value > 0)):
        bound = ">= 0" if zero_ok else "> 0 (None keeps forever)"
        raise RedflowError(f"{what} must be a finite number of seconds {bound}, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Retention:
    """Seconds a finished run is kept, per terminal status (None: forever), and
    ``max_finished``: at most about this many runs of the workflow are kept
    (the oldest finished ones go first; None: no cap). Numbers are seconds;
    timedeltas are accepted and stored as seconds."""

    succeeded: Duration = DAY_S
    failed: Duration = 7 * DAY_S
    canceled: Duration = 7 * DAY_S
    max_finished: int | None = None

    def __post_init__(self) -> None:
        for status in FINISHED_STATUSES:
            object.__setattr__(self, status, duration_s(getattr(self, status), f"retention {status}"))
        cap = self.max_finished
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise RedflowError(f"retention max_finished must be an int >= 1 or None, not {cap!r}")

    def keep_ms(self, status: str) -> int | None:
        """Milliseconds a run that ended ``status`` is kept; None: forever."""
        seconds = getattr(self, status)
        return None if seconds is None else max(1, round(seconds * 1000))

    @property
    def keeps_forever(self) -> bool:
        return self.max_finished is None and all(self.keep_ms(status) is None for status in FINISHED_STATUSES)


#: ``define_workflow``'s default: a day for succeeded runs, a week for the others.
DEFAULT_RETENTION = Retention()

#: ``retention=None``: finished runs stay until purged.
KEEP_FOREVER = Retention(succeeded=None, failed=None, canceled=None)

RetentionSpec = Retention | float | int | timedelta | None


def retention_of(spec: RetentionSpec) -> Retention:
    """``define_workflow(retention=...)`` as a :class:`Retention`: a number of
    seconds or a timedelta applies to every terminal status; None keeps forever."""
    if isinstance(spec, Retention):
        return spec
    if spec is None:
        return KEEP_FOREVER
    seconds = duration_s(spec, "retention")
    return Retention(succeeded=seconds, failed=seconds, canceled=seconds)


def retention_from_days(text: str) -> Retention:
    """``REDFLOW_RUN_RETENTION_DAYS`` (as in the asyncio package): days for every
    terminal status; ``0``, ``none``, ``off`` or ``forever`` keep finished runs forever."""
    value = text.strip().lower()
    if value in ("0", "none", "off", "forever"):
        return KEEP_FOREVER
    try:
        days = float(value)
    except ValueError:
        raise RedflowError(f"REDFLOW_RUN_RETENTION_DAYS must be a number of days or 'forever', not {text!r}") from None
    if not (days > 0 and math.isfinite(days)):
        raise RedflowError(f"REDFLOW_RUN_RETENTION_DAYS must be a positive number of days or 'forever', not {text!r}")
    return retention_of(days * DAY_S)
