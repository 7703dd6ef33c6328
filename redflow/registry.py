"""Workflow definitions: ``define_workflow``, ``Registry`` and input validation."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from redflow.core import cron
from redflow.core.deadlines import NO_DEADLINES, Deadlines
from redflow.core.errors import InputValidationError, RedflowError
from redflow.core.flow import Concurrency, FlowControl, RateLimit
from redflow.core.input_schema import as_schema
from redflow.core.retention import DEFAULT_RETENTION, Retention, RetentionSpec, retention_of
from redflow.core.retry import DEFAULT_RETRY, RetryPolicy
from redflow.core.singleton import Debounce, Singleton, one_of
from redflow.core.workflow_def import Registry, get_default_registry

__all__ = ["CronTrigger", "Registry", "Workflow", "define_workflow", "get_default_registry", "validate_input"]

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.engine.context import OnFailureContext, WorkflowContext
    from redflow.handle import RunHandle

Handler = Callable[["WorkflowContext"], Any]
OnFailure = Callable[["OnFailureContext"], Any]

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class CronTrigger:
    """One cron trigger of a workflow. ``input`` left unset is stored as ``{}``."""

    expression: str
    timezone: str | None = None
    input: Any = _UNSET
    id: str | None = None

    @property
    def has_input(self) -> bool:
        return self.input is not _UNSET

    @property
    def run_input(self) -> Any:
        return self.input if self.has_input else {}


def _cron_trigger(spec: CronTrigger | Mapping[str, Any] | str, workflow: str) -> CronTrigger:
    if isinstance(spec, CronTrigger):
        trigger = spec
    elif isinstance(spec, str):
        trigger = CronTrigger(expression=spec)
    elif isinstance(spec, Mapping):
        unknown = set(spec) - {"expression", "timezone", "input", "id"}
        if unknown or "expression" not in spec:
            raise RedflowError(f"workflow {workflow!r}: a cron trigger needs 'expression' (and only timezone/input/id), got {dict(spec)!r}")
        trigger = CronTrigger(
            expression=spec["expression"], timezone=spec.get("timezone"), input=spec.get("input", _UNSET), id=spec.get("id")
        )
    else:
        raise RedflowError(f"workflow {workflow!r}: bad cron trigger {spec!r}")
    cron.validate(trigger.expression, trigger.timezone)
    return trigger


def validate_input(schema: Any, value: Any) -> Any:
    """Run ``value`` through ``schema``; any failure becomes :class:`InputValidationError`.

    A schema is a callable ``(input) -> input`` that raises on bad input,
    any object with ``model_validate`` (a pydantic v2 model works without
    redflow depending on pydantic; its model is dumped back to JSON-able data),
    or a JSON Schema dict (``core/json_schema.py``: the input's JSON form is checked).
    """
    if schema is None:
        return value
    if isinstance(schema, Mapping):
        schema = as_schema(schema)
    try:
        if hasattr(schema, "model_validate"):
            model = schema.model_validate(value)
            return model.model_dump(mode="json") if hasattr(model, "model_dump") else model
        if callable(schema):
            return schema(value)
    except InputValidationError:
        raise
    except Exception as exc:  # the schema's own error type is unknown to us
        issues = exc.errors() if hasattr(exc, "errors") and callable(exc.errors) else None
        raise InputValidationError(f"Workflow input validation failed: {exc}", issues=issues) from exc
    raise RedflowError(f"schema {schema!r} is neither callable nor has model_validate()")


@dataclass(eq=False)
class Workflow:
    """A defined workflow: call ``.run(input)`` to start it, the worker calls ``handler``."""

    name: str
    handler: Handler
    queue: str = "default"
    max_attempts: int = 3
    schema: Any = None
    on_failure: OnFailure | None = None
    cron: tuple[CronTrigger, ...] = ()
    events: tuple[str, ...] = ()
    retention: Retention = DEFAULT_RETENTION
    registry: Registry | None = field(default=None, repr=False)
    concurrency: tuple[Concurrency, ...] = ()
    rate_limit: RateLimit | None = None
    #: its retry policy; None: the default one (redflow/core/retry.py)
    retry: RetryPolicy | None = None
    #: ``start_within`` and ``timeout`` (redflow/core/deadlines.py)
    deadlines: Deadlines = NO_DEADLINES
    #: at most one unfinished run per key, or calls collapsed into one run (redflow/core/singleton.py)
    singleton: Singleton | None = None
    debounce: Debounce | None = None
    #: ``concurrency`` and ``rate_limit``, checked (redflow/core/flow.py)
    flow: FlowControl = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.schema = as_schema(self.schema, workflow=self.name)  # a JSON Schema dict: checked, then compiled
        self.flow = FlowControl.of(self.name, self.concurrency, self.rate_limit)
        if self.retry is not None:  # the policy's attempts are the workflow's
            self.max_attempts = self.retry.max_attempts
        self.concurrency = self.flow.concurrency
        one_of(self.name, self.singleton, self.debounce)

    def validate(self, value: Any) -> Any:
        return validate_input(self.schema, value)

    def run(self, input: Any = None, *, client: RedflowClient | None = None, **run_options: Any) -> RunHandle:
        """Start a run of this workflow (``client``: the default client if omitted)."""
        if client is None:
            # Imported here, not above: ``from redflow import define_workflow`` must not import
            # redis (the CLI patches gevent first; ``run_inline`` needs no Redis). No circle: the
            # client reads workflows through core/workflow_def.py, never this module.
            from redflow.client import get_default_client

            client = get_default_client()
        return client.run(self, input, **run_options)

    def __call__(self, ctx: WorkflowContext) -> Any:
        return self.handler(ctx)


def define_workflow(
    name: str,
    *,
    queue: str = "default",
    max_attempts: int | None = None,
    schema: Any = None,
    on_failure: OnFailure | None = None,
    cron: Iterable[CronTrigger | Mapping[str, Any] | str] | None = None,
    events: Iterable[str] | None = None,
    retention: RetentionSpec = DEFAULT_RETENTION,
    registry: Registry | None = None,
    concurrency: Concurrency | Iterable[Concurrency] | None = None,
    rate_limit: RateLimit | None = None,
    retry: RetryPolicy | None = None,
    start_within: float | timedelta | None = None,
    timeout: float | timedelta | None = None,
    singleton: Singleton | None = None,
    debounce: Debounce | None = None,
) -> Callable[[Handler], Workflow]:
    """Decorator: define a workflow named ``name`` whose handler is the function.
    ``concurrency`` / ``rate_limit``: flow control (see redflow/core/flow.py);
    ``retry``, ``start_within``, ``timeout``, ``singleton``, ``debounce``: policies (docs/guide/policies.md)."""
    if not name or not isinstance(name, str):
        raise RedflowError("a workflow needs a non-empty name")
    if not queue or not isinstance(queue, str):
        raise RedflowError(f"workflow {name!r}: queue must be a non-empty string")
    attempts, policy, deadlines = _policies(name, max_attempts, retry, start_within, timeout)
    triggers = tuple(_cron_trigger(spec, name) for spec in (cron or ()))
    event_names = tuple(events or ())
    if any(not isinstance(e, str) or not e for e in event_names):
        raise RedflowError(f"workflow {name!r}: event names must be non-empty strings")
    try:
        kept = retention_of(retention)
    except RedflowError as exc:
        raise RedflowError(f"workflow {name!r}: {exc}") from None
    flow = FlowControl.of(name, concurrency, rate_limit)
    one_per_key = one_of(name, singleton, debounce)

    def decorate(handler: Handler) -> Workflow:
        if not callable(handler):
            raise RedflowError(f"workflow {name!r}: the handler must be callable")
        wf = Workflow(
            name=name,
            handler=handler,
            queue=queue,
            max_attempts=attempts,
            schema=schema,
            on_failure=on_failure,
            cron=triggers,
            events=event_names,
            retention=kept,
            concurrency=flow.concurrency,
            rate_limit=flow.rate_limit,
            retry=policy,
            deadlines=deadlines,
            singleton=one_per_key[0],
            debounce=one_per_key[1],
        )
        (registry if registry is not None else get_default_registry()).register(wf)
        return wf

    return decorate


def _policies(
    name: str, max_attempts: int | None, retry: RetryPolicy | None, start_within: Any, timeout: Any
) -> tuple[int, RetryPolicy | None, Deadlines]:
    """The attempts, retry policy and deadlines of a workflow, checked. ``max_attempts=``
    is a shorthand for the default policy with that many attempts: giving it with
    ``retry=`` is an error (the policy carries its own ``max_attempts``)."""
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise RedflowError(f"workflow {name!r}: retry must be a RetryPolicy, got {retry!r}")
    if max_attempts is not None:
        if retry is not None:
            raise RedflowError(f"workflow {name!r}: give max_attempts= or retry=RetryPolicy(max_attempts=...), not both")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise RedflowError(f"workflow {name!r}: max_attempts must be an int >= 1")
    attempts = retry.max_attempts if retry is not None else max_attempts or DEFAULT_RETRY.max_attempts
    try:
        return attempts, retry, Deadlines.of(start_within, timeout)
    except RedflowError as exc:
        raise RedflowError(f"workflow {name!r}: {exc}") from None
