"""The error tree and its JSON form.

Every redflow error has a stable ``name`` (the class name, as the TypeScript
client's ``error.name``) and a ``kind`` tag from DATA_MODEL.md. A run's
``errorJson`` is ``{"name", "message", "kind", "stack"?}``, the shape of the
seed's ``makeErrorJson``.
"""

from __future__ import annotations

import builtins
import math
import traceback
from datetime import timedelta
from typing import Any, ClassVar

KIND_ERROR = "error"
KIND_CANCELED = "canceled"
KIND_TIMEOUT = "timeout"
KIND_SERIALIZATION = "serialization"
KIND_UNKNOWN_WORKFLOW = "unknown_workflow"
KIND_VALIDATION = "validation"
KIND_NON_RETRIABLE = "non_retriable"
#: The asyncio ``redflow`` package's kind for its ``RetryAfterError`` (retryable, like ``error``).
KIND_RETRY_AFTER = "retry_after"


class RedflowError(Exception):
    """Base class of every error redflow raises."""

    kind: ClassVar[str] = KIND_ERROR
    name: ClassVar[str] = "RedflowError"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = cls.__name__


class CanceledError(RedflowError):
    """The run was canceled (or its worker lost the run's lease)."""

    kind = KIND_CANCELED

    def __init__(self, message: str = "Run canceled") -> None:
        super().__init__(message)


class TimeoutError(RedflowError, builtins.TimeoutError):  # noqa: A001 - the API name
    """A step ran past its timeout, or waiting for a result did."""

    kind = KIND_TIMEOUT

    def __init__(self, message: str = "Operation timed out") -> None:
        super().__init__(message)


class SerializationError(RedflowError, TypeError):
    """A value cannot be encoded as JSON (orjson)."""

    kind = KIND_SERIALIZATION


class OutputSerializationError(SerializationError):
    """A workflow's or step's output is not JSON-serializable."""


class CorruptDataError(RedflowError, ValueError):
    """Data read from Redis is not in the DATA_MODEL.md format (bad JSON, bad field)."""


class MissingBlobError(CorruptDataError):
    """A stored payload refers to a blob (``@blob:v1:...``, the asyncio package's
    large-payload reference) that is not in the run's blob hash: retention or a
    purge deleted it, or the writer died before writing it."""

    def __init__(self, run_id: str, field: str, ref: str) -> None:
        self.run_id = run_id
        self.field = field
        self.ref = ref
        super().__init__(f"run {run_id} {field} refers to a blob that is missing from the run's blob hash: {ref}")


class UnknownWorkflowError(RedflowError, LookupError):
    """No workflow of that name is registered (locally or in Redis)."""

    kind = KIND_UNKNOWN_WORKFLOW

    def __init__(self, workflow: str, *, searched: str | None = None, suggestions: tuple[str, ...] = (), hint: str | None = None) -> None:
        """``searched``: where the name was looked for; ``suggestions``: the known
        names nearest to it; ``hint``: what to check when nothing is near."""
        self.workflow = workflow
        self.searched = searched
        self.suggestions = suggestions
        if not workflow:
            message = "Run has no workflow name"
        else:
            message = f"Unknown workflow: {workflow!r}" + (f" (searched {searched})" if searched else "")
            if suggestions:
                message += f"; did you mean {' or '.join(repr(name) for name in suggestions)}?"
            if hint:
                message += f"; {hint}"
        super().__init__(message)


class InputValidationError(RedflowError, ValueError):
    """The input does not pass the workflow's schema (or is not JSON)."""

    kind = KIND_VALIDATION

    def __init__(self, message: str = "Workflow input validation failed", issues: Any = None) -> None:
        self.issues = issues
        super().__init__(message)


class NonRetryableError(RedflowError):
    """Raise it (or a subclass) in a handler to fail the run without retry."""

    kind = KIND_NON_RETRIABLE


NonRetriableError = NonRetryableError  # spelling of the TypeScript / asyncio clients


class RetryAfterError(RedflowError):
    """Raise it in a handler to have the run retried after ``seconds`` (a number
    or a timedelta), instead of its retry policy's wait. It uses an attempt like
    any failure, and is retried whatever the policy's ``retry_on`` says (unless
    its ``no_retry_on`` names it). Its error JSON carries ``retryAfterMs``, as
    the asyncio ``redflow`` package writes it."""

    kind = KIND_RETRY_AFTER

    def __init__(self, seconds: float | timedelta, message: str | None = None) -> None:
        value = seconds.total_seconds() if isinstance(seconds, timedelta) else seconds
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise RedflowError(f"RetryAfterError needs seconds >= 0 (a number or a timedelta), got {seconds!r}")
        self.retry_after_ms = int(round(value * 1000))
        super().__init__(message or f"retry after {value:g}s")


class DeadlineExceededError(NonRetryableError):
    """The run passed a deadline of its workflow: ``start_within`` (it was not
    started in time, so it never started) or ``timeout`` (the whole run took
    too long): ``deadline`` says which. Never retried; its error JSON's kind is
    ``non_retriable``, which the other clients read as a failure for good."""

    def __init__(self, message: str = "Run deadline exceeded", *, deadline: str = "timeout") -> None:
        super().__init__(message)
        self.deadline = deadline


class RunNotFoundError(RedflowError, LookupError):
    """No run with that id exists."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"Run not found: {run_id}")


class ScheduleNotFoundError(RedflowError, LookupError):
    """No schedule with that id (``client.schedules``)."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(f"no schedule {schedule_id!r}")


class ScheduleExistsError(RedflowError):
    """``client.schedules.create`` with an id that a schedule has already."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(f"a schedule {schedule_id!r} exists already; change it with update() or delete it first")


class RedisFullError(RedflowError):
    """Redis refused a write because it is at ``maxmemory`` (policy ``noeviction``),
    so nothing was written. Free memory (retention, ``client.purge``) or raise
    the limit; redis-py's ``OutOfMemoryError`` is the ``__cause__``."""

    def __init__(self, consequence: str = "nothing was enqueued") -> None:
        super().__init__(
            f"Redis is out of memory (maxmemory reached): {consequence}. Free memory (shorter retention, "
            "client.purge() or `redflow-gevent runs purge`) or raise maxmemory"
        )


class EvictingRedisError(RedflowError):
    """Redis's ``maxmemory-policy`` may evict redflow's keys (anything but
    ``noeviction``), and the worker was told to refuse such a Redis."""


class SignalBufferFullError(RedflowError):
    """``client.signal`` refused a signal: as many signals wait for the run as a
    run keeps (``core/signals.py``: per signal name, and in all). Nothing was
    stored; the run takes the waiting ones as its waits reach them."""

    def __init__(self, run_id: str, name: str, bounds: str) -> None:
        self.run_id = run_id
        self.signal = name
        super().__init__(f"run {run_id} has as many signals waiting as a run keeps ({bounds}); signal {name!r} was not stored")


class RunFailedError(RedflowError):
    """The awaited run ended ``failed``; ``.error`` holds its error JSON."""

    def __init__(self, run_id: str, error: dict[str, Any] | None) -> None:
        self.run_id = run_id
        self.error = error or {}
        label = self.error.get("name", "Error")
        detail = self.error.get("message", "")
        super().__init__(f"Run {run_id} failed: {label}: {detail}" if detail else f"Run {run_id} failed: {label}")


def error_kind(err: BaseException) -> str:
    return err.kind if isinstance(err, RedflowError) else KIND_ERROR


def error_name(err: BaseException) -> str:
    return err.name if isinstance(err, RedflowError) else type(err).__name__


def error_to_json(err: BaseException, *, with_stack: bool = True) -> dict[str, Any]:
    """The ``errorJson`` object of ``err``: ``{name, message, kind, stack?}``."""
    out: dict[str, Any] = {"name": error_name(err), "message": str(err), "kind": error_kind(err)}
    if isinstance(err, RetryAfterError):
        out["retryAfterMs"] = err.retry_after_ms
    if with_stack and err.__traceback__ is not None:
        out["stack"] = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return out
