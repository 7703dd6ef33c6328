"""Retry policy: which errors retry, and after how long.

The delay is DATA_MODEL.md's formula, shared with the other clients:
``min(30000, 250 * 2 ** max(0, attempt - 1)) + randint(0, 99)`` ms, i.e.
250-349 ms after the first attempt, 500-599 after the second, 1000-1099
after the third, ... and at most 30,099 ms. The jitter spreads retries of
runs that failed together.
"""

from __future__ import annotations

import random

from redflow.core.errors import (
    CanceledError,
    CorruptDataError,
    InputValidationError,
    NonRetryableError,
    OutputSerializationError,
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


def compute_retry_delay_ms(attempt: int) -> int:
    """Milliseconds to wait before retrying after failed attempt number ``attempt`` (1-based)."""
    exponent = min(max(0, attempt - 1), 20)  # 250 * 2**20 is far past the cap
    backoff = min(RETRY_CAP_MS, RETRY_BASE_MS << exponent)
    return backoff + random.randint(0, RETRY_JITTER_MS - 1)


def is_retryable(err: BaseException) -> bool:
    """Whether a failed attempt with ``err`` may be retried (timeouts and plain errors may)."""
    return not isinstance(err, _NOT_RETRYABLE)
