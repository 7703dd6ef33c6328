"""redflow: durable Redis-backed workflows with a gevent worker.

Public names are loaded lazily, so that ``import redflow`` (which the
``redflow-gevent`` command does before anything else) imports neither
``redis`` nor ``ssl`` before gevent has monkey-patched them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from redflow.core.version import VERSION as __version__

_EXPORTS = {
    # workflows
    "define_workflow": "registry",
    "Registry": "registry",
    "Workflow": "registry",
    "CronTrigger": "registry",
    "get_default_registry": "registry",
    "Retention": "core.retention",
    # flow control
    "Concurrency": "core.flow",
    "RateLimit": "core.flow",
    # retries
    "RetryPolicy": "core.retry",
    # one run per key
    "Singleton": "core.singleton",
    "Debounce": "core.singleton",
    # client
    "create_client": "client",
    "RedflowClient": "client",
    "RunHandle": "handle",
    "get_default_client": "client",
    "set_default_client": "client",
    # models
    "Run": "core.models",
    "Step": "core.models",
    "Schedule": "core.models",
    "StreamItem": "core.models.streams",
    # execution
    "start_worker": "engine.worker",
    "Worker": "engine.worker",
    "WorkerOptions": "engine.worker",
    "WorkflowContext": "engine.context",
    "OnFailureContext": "engine.context",
    "RunInfo": "engine.run_info",
    "CancelSignal": "engine.interrupts",
    # errors
    "RedflowError": "core.errors",
    "CanceledError": "core.errors",
    "TimeoutError": "core.errors",
    "SerializationError": "core.errors",
    "OutputSerializationError": "core.errors",
    "CorruptDataError": "core.errors",
    "MissingBlobError": "core.errors",
    "UnknownWorkflowError": "core.errors",
    "InputValidationError": "core.errors",
    "RunFailedError": "core.errors",
    "RunNotFoundError": "core.errors",
    "NonRetryableError": "core.errors",
    "NonRetriableError": "core.errors",
    "RetryAfterError": "core.errors",
    "DeadlineExceededError": "core.errors",
    "RedisFullError": "core.errors",
    "SignalBufferFullError": "core.errors",
    "EvictingRedisError": "core.errors",
    "ScheduleNotFoundError": "core.errors",
    "ScheduleExistsError": "core.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'redflow' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from redflow.client import RedflowClient, create_client, get_default_client, set_default_client
    from redflow.core.errors import (
        CanceledError,
        CorruptDataError,
        DeadlineExceededError,
        EvictingRedisError,
        InputValidationError,
        MissingBlobError,
        NonRetriableError,
        NonRetryableError,
        OutputSerializationError,
        RedflowError,
        RedisFullError,
        RetryAfterError,
        RunFailedError,
        RunNotFoundError,
        ScheduleExistsError,
        ScheduleNotFoundError,
        SerializationError,
        SignalBufferFullError,
        TimeoutError,
        UnknownWorkflowError,
    )
    from redflow.core.flow import Concurrency, RateLimit
    from redflow.core.models import Run, Schedule, Step
    from redflow.core.models.streams import StreamItem
    from redflow.core.retention import Retention
    from redflow.core.retry import RetryPolicy
    from redflow.core.singleton import Debounce, Singleton
    from redflow.engine.context import OnFailureContext, WorkflowContext
    from redflow.engine.interrupts import CancelSignal
    from redflow.engine.run_info import RunInfo
    from redflow.engine.worker import Worker, WorkerOptions, start_worker
    from redflow.handle import RunHandle
    from redflow.registry import CronTrigger, Registry, Workflow, define_workflow, get_default_registry
