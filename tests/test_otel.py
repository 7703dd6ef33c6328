"""OpenTelemetry tracing with the real SDK and its in-memory exporter: a request
to the pywsgi example enqueues a run, and the worker's spans for that run
continue the request's trace across the queue."""

from __future__ import annotations

import subprocess
import sys

import pytest
from gevent.pywsgi import WSGIServer
from helpers import wait_until
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from test_embedding import call

from examples import web_app
from redflow import define_workflow
from redflow.ops.observe import otel


@pytest.fixture
def traced():
    """A tracer provider exporting to memory, and redflow instrumented with it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    yield provider, exporter
    otel.uninstrument()
    provider.shutdown()


def finished(exporter, *names):
    """Wait for these spans: an attempt's span ends just after its settle, which is when a waiter wakes."""
    wait_until(lambda: set(names) <= {s.name for s in exporter.get_finished_spans()}, timeout=10)


def named(spans, name):
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def test_a_request_to_the_pywsgi_example_enqueues_a_run_whose_spans_share_its_trace(traced, redis_url, prefix, monkeypatch):
    provider, exporter = traced
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("REDFLOW_PREFIX", prefix)
    monkeypatch.setattr(web_app, "_client", None)
    server_tracer = provider.get_tracer("http-server")

    def traced_app(environ, start_response):  # what a WSGI instrumentation does: a server span per request
        with server_tracer.start_as_current_span(f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}", kind=SpanKind.SERVER):
            return web_app.app(environ, start_response)

    server = WSGIServer(("127.0.0.1", 0), traced_app, log=None)
    server.start()
    worker = web_app.start_embedded_worker(concurrency=2)
    try:
        status, body = call(f"http://127.0.0.1:{server.server_port}/runs", {"name": "Ada"})
        assert status == 202
        status, run = call(f"http://127.0.0.1:{server.server_port}/runs/{body['id']}?wait=10")
        assert run["status"] == "succeeded" and run["output"]["greeting"] == "Hello, Ada!"
    finally:
        server.stop(timeout=1)
        worker.stop(timeout=5)
        web_app.client().close()

    spans = exporter.get_finished_spans()
    request, enqueue = named(spans, "POST /runs"), named(spans, "redflow enqueue greet")
    attempt = named(spans, "redflow run greet")
    steps = [named(spans, f"redflow step {step}") for step in ("compose", "pause", "shout")]
    trace_id = request.context.trace_id
    assert {s.context.trace_id for s in (enqueue, attempt, *steps)} == {trace_id}
    assert enqueue.parent.span_id == request.context.span_id and enqueue.kind is SpanKind.PRODUCER
    assert attempt.parent.span_id == enqueue.context.span_id and attempt.kind is SpanKind.CONSUMER
    assert all(step.parent.span_id == attempt.context.span_id for step in steps)
    assert enqueue.attributes["redflow.run_id"] == body["id"] == attempt.attributes["redflow.run_id"]
    assert attempt.attributes["redflow.workflow"] == "greet" and attempt.attributes["redflow.attempt"] == 1
    assert attempt.attributes["redflow.outcome"] == "succeeded" and attempt.attributes["messaging.destination.name"] == "default"


def test_child_runs_and_events_started_by_steps_stay_in_the_parents_trace(traced, client, registry, start):
    _, exporter = traced

    @define_workflow("child", registry=registry)
    def child(ctx):
        return ctx.input["n"] * 2

    @define_workflow("notified", registry=registry, events=["order.done"])
    def notified(ctx):
        return None

    @define_workflow("parent", registry=registry)
    def parent(ctx):
        doubled = ctx.step.run_workflow("double", "child", {"n": 21})
        ctx.step.emit_event("announce", "order.done", {"n": doubled})
        return doubled

    start()
    assert client.run("parent", {}).result(10) == 42
    finished(exporter, "redflow run parent", "redflow run child", "redflow run notified")  # attempt spans end after their settle
    spans = exporter.get_finished_spans()
    root = named(spans, "redflow enqueue parent")
    assert root.parent is None  # nothing was active where the run was started: the enqueue starts the trace
    by_id = {s.context.span_id: s for s in spans}

    def chain(span):
        names = []
        while span is not None:
            names.append(span.name)
            span = by_id.get(span.parent.span_id) if span.parent else None
        return names

    assert chain(named(spans, "redflow run child")) == [
        "redflow run child", "redflow enqueue child", "redflow step double", "redflow run parent", "redflow enqueue parent",
    ]  # fmt: skip
    assert chain(named(spans, "redflow run notified")) == [
        "redflow run notified", "redflow enqueue notified", "redflow emit order.done", "redflow step announce",
        "redflow run parent", "redflow enqueue parent",
    ]  # fmt: skip
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}


def test_a_failed_step_and_attempt_are_marked_as_errors(traced, client, registry, start):
    _, exporter = traced

    @define_workflow("flaky", registry=registry, max_attempts=1)
    def flaky(ctx):
        ctx.step.run("call-api", lambda: 1 / 0)

    start()
    with pytest.raises(Exception, match="division by zero"):
        client.run("flaky", {}).result(10)
    finished(exporter, "redflow run flaky")
    spans = exporter.get_finished_spans()
    step, attempt = named(spans, "redflow step call-api"), named(spans, "redflow run flaky")
    assert not step.status.is_ok and step.events[0].name == "exception"
    assert attempt.attributes["redflow.outcome"] == "failed" and not attempt.status.is_ok


WITHOUT_OTEL = """
import sys

class NoOpenTelemetry:  # as if the [otel] extra were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r}")

sys.meta_path.insert(0, NoOpenTelemetry())
from gevent import monkey
monkey.patch_all()
import redflow
from redflow import Registry, create_client, define_workflow
from redflow.ops.cli import build_parser
build_parser()
registry = Registry()
define_workflow("plain", registry=registry)(lambda ctx: None)
client = create_client(sys.argv[1], prefix=sys.argv[2], registry=registry)
print(client.run("plain", {}, tags={"t": "1"}).id, "redflow.ops.observe.otel" in sys.modules)
"""


def test_without_the_extra_everything_works_and_no_trace_context_is_stored(redis_url, prefix, r, client):
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTEL, redis_url, prefix], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_id, otel_imported = done.stdout.split()
    assert otel_imported == "False" and client.get_run(run_id).tags == {"t": "1"}
    assert r.hget(client.keys.run(run_id), "traceparent") is None
