"""Retry policies: which errors retry, and after how long.

A workflow without ``retry=`` keeps DATA_MODEL.md's backoff, shared with the
other clients' workers: ``min(30000, 250 * 2 ** max(0, attempt - 1)) +
randint(0, 99)`` ms, i.e. 250-349 ms after the first attempt, 500-599 after
the second, 1000-1099 after the third, ... and at most 30,099 ms. That is
:data:`DEFAULT_RETRY` (``RetryPolicy(max_attempts=3, initial_delay=0.25,
factor=2.0, max_delay=30.0, jitter=0.0)``) plus the 0-99 ms the other
workers add, which spread retries of runs that failed together. A
:class:`RetryPolicy` given explicitly waits exactly what its formula says
(with ``jitter=0``, the same delays every time).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from redflow.core.errors import (
    CanceledError,
    CorruptDataError,
    InputValidationError,
    NonRetryableError,
    OutputSerializationError,
    RedflowError,
    RetryAfterError,
    UnknownWorkflowError,
)

RETRY_BASE_MS = 250
RETRY_CAP_MS = 30_000
RETRY_JITTER_MS = 100

_NOT_RETRYABLE = (
    NonRetryableError,
    CorruptDataError,
    InputValidationError,
    UnknownWorkflowError,
    OutputSerializationError,
    CanceledError,
)

ErrorClasses = tuple[type[BaseException], ...]


def compute_retry_delay_ms(attempt: int) -> int:
    """Milliseconds to wait before retrying after failed attempt number ``attempt``
    (1-based), by DATA_MODEL.md's formula (the default policy's)."""
    exponent = min(max(0, attempt - 1), 20)  # 250 * 2**20 is far past the cap
    backoff = min(RETRY_CAP_MS, RETRY_BASE_MS << exponent)
    return backoff + random.randint(0, RETRY_JITTER_MS - 1)


def is_retryable(err: BaseException) -> bool:
    """Whether a failed attempt with ``err`` may be retried under any policy
    (timeouts and plain errors may; ``NonRetryableError``, a canceled run, bad
    input or output, an unknown workflow and corrupt data may not)."""
    return not isinstance(err, _NOT_RETRYABLE)


def _seconds(value: Any, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
        raise RedflowError(f"RetryPolicy {what} must be a finite number of seconds >= 0 (or a timedelta), got {value!r}")
    return float(seconds)


def _classes(value: Any, what: str) -> ErrorClasses:
    """A class or an iterable of classes, as a tuple of exception classes."""
    items = (value,) if isinstance(value, type) else value
    if not isinstance(items, Iterable) or isinstance(items, str | bytes):
        raise RedflowError(f"RetryPolicy {what} must be an exception class or a tuple of them, got {value!r}")
    classes = tuple(items)
    if not all(isinstance(cls, type) and issubclass(cls, BaseException) for cls in classes):
        raise RedflowError(f"RetryPolicy {what} must hold exception classes only, got {value!r}")
    return classes


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a run gets and how long it waits between them.

    The wait before attempt n+1 is ``min(max_delay, initial_delay * factor **
    (n - 1))`` seconds times a random factor in ``[1 - jitter, 1 + jitter]``.
    An error that is an instance of a ``no_retry_on`` class fails the run at
    once; with ``retry_on`` given, only its classes are retried.
    ``NonRetryableError`` never is; ``RetryAfterError(seconds)`` sets the wait
    itself. Bad values raise ``RedflowError`` here, at define time."""

    max_attempts: int = 3
    initial_delay: float = 0.25
    factor: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.0
    retry_on: ErrorClasses | None = None
    no_retry_on: ErrorClasses = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise RedflowError(f"RetryPolicy max_attempts must be an int >= 1, got {self.max_attempts!r}")
        initial, longest = _seconds(self.initial_delay, "initial_delay"), _seconds(self.max_delay, "max_delay")
        if longest < initial:
            raise RedflowError(f"RetryPolicy max_delay ({longest:g}s) must be >= initial_delay ({initial:g}s)")
        factor = self.factor
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not math.isfinite(factor) or factor < 1:
            raise RedflowError(f"RetryPolicy factor must be a finite number >= 1, got {factor!r}")
        jitter = self.jitter
        if isinstance(jitter, bool) or not isinstance(jitter, int | float) or not 0 <= jitter <= 1:
            raise RedflowError(f"RetryPolicy jitter must be a number from 0 to 1, got {jitter!r}")
        retry_on = None if self.retry_on is None else _classes(self.retry_on, "retry_on")
        if retry_on == ():
            raise RedflowError("RetryPolicy retry_on needs at least one exception class (None retries every retryable error)")
        for name, value in (("initial_delay", initial), ("max_delay", longest), ("factor", float(factor)), ("jitter", float(jitter))):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "retry_on", retry_on)
        object.__setattr__(self, "no_retry_on", _classes(self.no_retry_on, "no_retry_on"))

    def backoff_ms(self, attempt: int) -> int:
        """The wait after failed attempt ``attempt`` (1-based) before the next one, in ms."""
        try:
            base_s = min(self.max_delay, self.initial_delay * self.factor ** max(0, attempt - 1))
        except OverflowError:  # factor ** a huge attempt: far past max_delay
            base_s = self.max_delay
        spread = random.uniform(1.0 - self.jitter, 1.0 + self.jitter) if self.jitter else 1.0
        return int(round(base_s * spread * 1000))

    def retries(self, err: BaseException) -> bool:
        """Whether ``err`` may be retried under this policy (attempts aside)."""
        if not is_retryable(err) or isinstance(err, self.no_retry_on):
            return False
        if isinstance(err, RetryAfterError) or self.retry_on is None:
            return True
        return isinstance(err, self.retry_on)

    def summary(self) -> dict[str, Any]:
        """The policy as JSON (the workflow's synced ``retryJson``, for the views)."""
        out: dict[str, Any] = {
            "maxAttempts": self.max_attempts,
            "initialDelayMs": int(round(self.initial_delay * 1000)),
            "factor": self.factor,
            "maxDelayMs": int(round(self.max_delay * 1000)),
            "jitter": self.jitter,
        }
        if self.retry_on is not None:
            out["retryOn"] = [cls.__name__ for cls in self.retry_on]
        if self.no_retry_on:
            out["noRetryOn"] = [cls.__name__ for cls in self.no_retry_on]
        return out


#: What a workflow without ``retry=`` gets (and DATA_MODEL.md's 0-99 ms on top, see the module docstring).
DEFAULT_RETRY = RetryPolicy()


def retry_delay_ms(err: BaseException, attempt: int, policy: RetryPolicy | None) -> int | None:
    """How long to wait before retrying after attempt ``attempt`` failed with
    ``err``, or None when ``err`` is not to be retried (attempts aside).
    ``policy`` None: the default one, with DATA_MODEL.md's backoff."""
    if not (policy or DEFAULT_RETRY).retries(err):
        return None
    if isinstance(err, RetryAfterError):
        return err.retry_after_ms
    return compute_retry_delay_ms(attempt) if policy is None else policy.backoff_ms(attempt)
