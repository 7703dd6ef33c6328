"""OpenTelemetry tracing: ``pip install redflow-gevent[otel]``, then ``instrument()``.

Spans, all under the instrumentation scope ``redflow``:

- ``redflow enqueue <workflow>`` (PRODUCER), where a client starts a run: a
  request handler, a cron fire, a step's child run or event. Its trace
  context is stored on the run (``traceparent`` / ``tracestate`` fields of
  the run hash, written only when a span is active; other clients ignore
  them), so the worker's spans continue the enqueuing code's trace.
- ``redflow emit <event>`` (PRODUCER) around an event's fan-out, its runs'
  enqueue spans inside it.
- ``redflow run <workflow>`` (CONSUMER), one per attempt, child of the
  enqueue span: run id, workflow, queue, attempt and outcome.
- ``redflow step <name>`` (INTERNAL) around each step function that runs
  (replayed steps do not run), inside the attempt's span; child runs and
  events started by a step are children of its span.

Nothing here is imported unless you import it: the package itself does not
depend on OpenTelemetry. Hooked through the client's enqueue hooks and the
worker's observers, so tracing off costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import gevent
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from redflow.core.enqueue_hooks import add_enqueue_hook, remove_enqueue_hook
from redflow.core.models import RunField
from redflow.core.version import VERSION
from redflow.engine.context import RunInfo
from redflow.engine.observers import AttemptReport, WorkerObserver, add_global_observer, remove_global_observer

_FAILED_OUTCOMES = frozenset({"failed", "abandoned"})


class Tracing(WorkerObserver):
    """Spans for enqueues (a client hook) and for attempts and steps (a worker observer)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self.tracer = trace.get_tracer("redflow", VERSION, tracer_provider=tracer_provider)
        self._propagator = TraceContextTextMapPropagator()
        self._attempts: dict[Any, tuple[str, Any, object]] = {}  # greenlet -> (run id, span, context token)

    # -- clients --------------------------------------------------------------
    @contextmanager
    def enqueue_hook(self, operation: str, name: str, fields: dict[str, str]) -> Iterator[Callable[[str], None]]:
        """The client hook: a producer span around one enqueue (its context into
        ``fields``, stored on the run) or one event's fan-out."""
        span_name = f"redflow enqueue {name}" if operation == "enqueue" else f"redflow emit {name}"
        attributes = {"messaging.system": "redflow", "messaging.operation.type": "send"}
        attributes["redflow.workflow" if operation == "enqueue" else "redflow.event"] = name
        with self.tracer.start_as_current_span(span_name, kind=SpanKind.PRODUCER, attributes=attributes) as span:
            run_ids: list[str] = []
            if operation == "enqueue":
                self._propagator.inject(fields)

            def note(run_id: str) -> None:
                run_ids.append(run_id)
                if operation == "enqueue":
                    span.set_attribute("redflow.run_id", run_id)
                    span.set_attribute("messaging.message.id", run_id)
                else:
                    span.set_attribute("redflow.run_ids", list(run_ids))

            yield note

    # -- workers --------------------------------------------------------------
    def on_attempt_begin(self, info: RunInfo, fields: Mapping[str, str]) -> None:
        glet = gevent.getcurrent()
        self._end(glet, "abandoned")  # a previous attempt of this greenlet that never reported (its settle raised)
        carrier = {k: fields[k] for k in (RunField.TRACEPARENT, RunField.TRACESTATE) if fields.get(k)}
        parent = self._propagator.extract(carrier) if carrier else otel_context.Context()
        span = self.tracer.start_span(
            f"redflow run {info.workflow}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "redflow", "messaging.operation.type": "process", "messaging.destination.name": info.queue,
                "messaging.message.id": info.id, "redflow.run_id": info.id, "redflow.workflow": info.workflow,
                "redflow.queue": info.queue, "redflow.attempt": info.attempt,
            },
        )  # fmt: skip
        token = otel_context.attach(trace.set_span_in_context(span))
        self._attempts[glet] = (info.id, span, token)

    def on_attempt(self, report: AttemptReport) -> None:
        held = self._attempts.get(gevent.getcurrent())
        if held is not None and held[0] == report.run_id:
            self._end(gevent.getcurrent(), report.outcome)

    def _end(self, glet: Any, outcome: str) -> None:
        held = self._attempts.pop(glet, None)
        if held is None:
            return
        _, span, token = held
        span.set_attribute("redflow.outcome", outcome)
        if outcome in _FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end()
        otel_context.detach(token)  # type: ignore[arg-type]

    @contextmanager
    def step_scope(self, info: RunInfo, step: str) -> Iterator[None]:
        attributes: dict[str, str | int] = {
            "redflow.run_id": info.id, "redflow.workflow": info.workflow, "redflow.step": step, "redflow.attempt": info.attempt,
        }  # fmt: skip
        with self.tracer.start_as_current_span(f"redflow step {step}", attributes=attributes):
            yield


_installed: list[Tracing] = []


def instrument(tracer_provider: Any = None) -> Tracing:
    """Trace every client and every worker started from now on in this process
    (``tracer_provider``: default the global one). Returns the :class:`Tracing`."""
    tracing = Tracing(tracer_provider)
    add_enqueue_hook(tracing.enqueue_hook)
    add_global_observer(tracing)
    _installed.append(tracing)
    return tracing


def uninstrument() -> None:
    """Stop tracing (workers already started keep their observer)."""
    while _installed:
        tracing = _installed.pop()
        remove_enqueue_hook(tracing.enqueue_hook)
        remove_global_observer(tracing)
