"""Prometheus metrics of a worker: a :class:`~redflow.engine.observers.WorkerObserver` and an HTTP endpoint.

Install the ``metrics`` extra (``prometheus_client``). The observer keeps
its own ``CollectorRegistry`` (not prometheus_client's global one), so two
workers in one process never clash. Counters and histograms move on the
worker's hot path (a label lookup and an increment each, nothing that waits); the
in-flight gauge is read from ``worker.in_flight`` only when scraped, and so
are the flow-control gauges (runs running / limit / held per workflow with
limits, two Redis round trips per scrape) and the counts of ``client.run``
calls a singleton skipped or a debounce collapsed (any client's: one round
trip per scrape, for a worker that has such workflows).

Step durations are labelled by workflow and status, not by step name:
names like ``f"part-{i}"`` would give every run its own series.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gevent.pywsgi import WSGIServer
from redis.exceptions import RedisError

try:
    from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as exc:  # an optional dependency: say how to get it
    raise ImportError("redflow metrics need prometheus_client: pip install 'redflow-gevent[metrics]'") from exc

from redflow.core.errors import RedflowError
from redflow.engine.observers import AttemptReport, WorkerObserver
from redflow.ops.views.flow import flow_rows
from redflow.ops.views.stats import one_run_calls
from redflow.ops.views.workers import STATES, list_workers, totals
from redflow.ops.wsgi_server import start_wsgi_server

if TYPE_CHECKING:
    from redflow.engine.worker import Worker

log = logging.getLogger("redflow.metrics")

DEFAULT_HOST = "127.0.0.1"
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
CLAIM_BUCKETS_S = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

#: AttemptReport.outcome -> (metric name, help). "started" is counted apart.
_OUTCOME_COUNTERS = {
    "succeeded": ("redflow_runs_succeeded", "Runs that ended succeeded."),
    "failed": ("redflow_runs_failed", "Runs that ended failed (no retry left, or not retryable)."),
    "retried": ("redflow_runs_retried", "Failed attempts scheduled for a retry."),
    "canceled": ("redflow_runs_canceled", "Runs that ended canceled."),
    "parked": ("redflow_attempts_parked", "Attempts that parked their run in a durable wait (sleep, event, children)."),
    "abandoned": ("redflow_attempts_abandoned", "Attempts left to another worker (lease lost, worker stopping)."),
    "skipped": ("redflow_attempts_skipped", "Claims with nothing to run (held elsewhere, gone, already finished)."),
}


class _SlotsCollector(Collector):
    """In-flight and total slots, read from the attached worker at scrape time."""

    def __init__(self, observer: MetricsObserver) -> None:
        self._observer = observer

    def collect(self) -> Iterator[GaugeMetricFamily]:
        worker = self._observer.worker
        in_flight = GaugeMetricFamily("redflow_in_flight_runs", "Runs this worker is executing now (busy slots).")
        in_flight.add_metric([], worker.in_flight if worker is not None else 0)
        slots = GaugeMetricFamily("redflow_slots", "Consumer slots of this worker (its concurrency).")
        slots.add_metric([], worker.options.concurrency if worker is not None else 0)
        yield in_flight
        yield slots


class _RegistryCollector(Collector):
    """The worker registry as every worker sees it (all workers of the prefix), read from Redis at
    scrape time; left out of a scrape when Redis does not answer (the scrape itself must not fail)."""

    def __init__(self, observer: MetricsObserver) -> None:
        self._observer = observer

    def collect(self) -> Iterator[GaugeMetricFamily]:
        worker = self._observer.worker
        if worker is None:
            return
        try:
            counts = totals(list_workers(worker.client))
        except RedisError as exc:
            log.warning("metrics: cannot read the worker registry: %s", exc)
            return
        workers = GaugeMetricFamily(
            "redflow_workers", "Workers with a heartbeat record, by state (alive, stopping, lost).", labels=["state"]
        )
        for state in STATES:
            workers.add_metric([state], counts[state])
        busy = GaugeMetricFamily("redflow_workers_slots_busy", "Busy slots over every live worker of the prefix.")
        busy.add_metric([], counts["busy"])
        slots = GaugeMetricFamily("redflow_workers_slots", "Slots over every live worker of the prefix.")
        slots.add_metric([], counts["slots"])
        yield workers
        yield busy
        yield slots


class _FlowCollector(Collector):
    """Per workflow of the attached worker that has limits: running, limit, held
    (read from Redis at scrape time, as ``redflow-gevent queues`` shows them)."""

    def __init__(self, observer: MetricsObserver) -> None:
        self._observer = observer

    def collect(self) -> Iterator[GaugeMetricFamily]:
        running = GaugeMetricFamily("redflow_flow_running_runs", "Runs running of a workflow with limits.", labels=["workflow"])
        limit = GaugeMetricFamily("redflow_flow_limit", "The workflow-wide concurrency limit.", labels=["workflow"])
        held = GaugeMetricFamily("redflow_flow_held_runs", "Runs held back by a concurrency or rate limit.", labels=["workflow"])
        worker = self._observer.worker
        names = [wf.name for wf in worker.registry.list() if wf.flow.active] if worker is not None else []
        if names:
            try:
                rows = flow_rows(worker.client, names) if worker is not None else []
            except RedisError as exc:  # a scrape must still answer: the other metrics do not need Redis
                log.warning("metrics: could not read flow control counts (%s)", exc)
                rows = []
            for row in rows:
                running.add_metric([row.workflow], row.running)
                held.add_metric([row.workflow], row.held)
                if row.limit is not None:
                    limit.add_metric([row.workflow], row.limit)
        yield running
        yield limit
        yield held


class _OneRunCollector(Collector):
    """Calls of ``client.run`` (by any client) that a singleton skipped or a debounce
    collapsed into a run already there, per workflow of the attached worker that has one."""

    def __init__(self, observer: MetricsObserver) -> None:
        self._observer = observer

    def collect(self) -> Iterator[CounterMetricFamily]:
        skipped = CounterMetricFamily(
            "redflow_runs_skipped", "client.run calls a singleton skipped: they returned the key's unfinished run.", labels=["workflow"]
        )
        collapsed = CounterMetricFamily(
            "redflow_runs_collapsed",
            "client.run calls a debounce collapsed into the run still scheduled for their key.",
            labels=["workflow"],
        )
        worker = self._observer.worker
        names = [wf.name for wf in worker.registry.list() if wf.singleton or wf.debounce] if worker is not None else []
        if names and worker is not None:
            try:
                calls = one_run_calls(worker.client)
            except RedisError as exc:  # a scrape must still answer
                log.warning("metrics: could not read the skipped and collapsed calls (%s)", exc)
                calls = {}
            for name in names:
                skipped.add_metric([name], calls.get((name, "skipped"), 0))
                collapsed.add_metric([name], calls.get((name, "collapsed"), 0))
        yield skipped
        yield collapsed


class MetricsObserver(WorkerObserver):
    """Turns worker events into Prometheus metrics; pass it to ``start_worker(observers=[...])``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.worker: Worker | None = None
        reg = self.registry
        self.started = Counter("redflow_runs_started", "Runs whose first attempt started.", ["workflow"], registry=reg)
        self.outcomes = {outcome: Counter(name, doc, ["workflow"], registry=reg) for outcome, (name, doc) in _OUTCOME_COUNTERS.items()}
        self.expired = Counter(
            "redflow_runs_expired",
            "Runs that ended failed by a deadline (DeadlineExceededError; also counted as failed): "
            "deadline is start (start_within: it never started) or timeout.",
            ["workflow", "deadline"],
            registry=reg,
        )
        self.run_duration = Histogram(
            "redflow_run_duration_seconds",
            "Time an attempt held its run, from start to settle.",
            ["workflow", "outcome"],
            buckets=DURATION_BUCKETS_S,
            registry=reg,
        )
        self.step_duration = Histogram(
            "redflow_step_duration_seconds", "Time a step function ran.", ["workflow", "status"], buckets=DURATION_BUCKETS_S, registry=reg
        )
        self.claim_latency = Histogram(
            "redflow_claim_latency_seconds",
            "Time a slot waited in LMOVE/BLMOVE before it claimed a run (high when idle).",
            ["queue"],
            buckets=CLAIM_BUCKETS_S,
            registry=reg,
        )
        self.leases_lost = Counter("redflow_lease_renewals_lost", "Attempts stopped because their lease was lost.", registry=reg)
        self.recovered = Counter("redflow_reaper_recoveries", "Runs of dead workers the reaper returned to ready.", ["queue"], registry=reg)
        reg.register(_SlotsCollector(self))
        reg.register(_RegistryCollector(self))
        reg.register(_FlowCollector(self))
        reg.register(_OneRunCollector(self))

    def attach(self, worker: Worker) -> MetricsObserver:
        """Read in-flight slots from ``worker`` at scrape time."""
        self.worker = worker
        return self

    def on_attempt(self, report: AttemptReport) -> None:
        workflow = report.workflow or "(unknown)"  # runs canceled or gone before they started have no name yet
        self.outcomes[report.outcome].labels(workflow).inc()
        if report.deadline:
            self.expired.labels(workflow, report.deadline).inc()
        if report.outcome == "skipped":
            return
        self.run_duration.labels(workflow, report.outcome).observe(max(0.0, report.finished_at - report.started_at))

    def on_start(self, run_id: str, workflow: str, queue: str, attempt: int) -> None:
        if attempt == 1:
            self.started.labels(workflow).inc()

    def on_step(self, workflow: str, step: str, status: str, duration_s: float) -> None:
        self.step_duration.labels(workflow, status).observe(max(0.0, duration_s))

    def on_claim(self, queue: str, waited_s: float) -> None:
        self.claim_latency.labels(queue).observe(max(0.0, waited_s))

    def on_lease_lost(self, run_id: str) -> None:
        self.leases_lost.inc()

    def on_recovered(self, queue: str, count: int) -> None:
        self.recovered.labels(queue).inc(count)


def parse_listen(spec: str | int) -> tuple[str, int]:
    """``"9100"``, ``9100`` or ``"0.0.0.0:9100"`` -> ``(host, port)``; the host defaults to loopback."""
    text = str(spec).strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host = DEFAULT_HOST
    host = host.strip("[]") or DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError:
        raise RedflowError(f"metrics address must be PORT or HOST:PORT, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise RedflowError(f"metrics port must be 0-65535, got {port}")
    return host, port


class MetricsServer:
    """Serves ``observer.registry`` in the Prometheus text format on a gevent WSGI server."""

    def __init__(self, observer: MetricsObserver, host: str = DEFAULT_HOST, port: int = 0) -> None:
        self.observer = observer
        self.host = host
        self._requested_port = port
        self._server: WSGIServer | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self._server.server_port if self._server is not None else self._requested_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        app = make_wsgi_app(self.observer.registry)
        self._server = start_wsgi_server(
            app, self.host, self._requested_port, what="metrics", access_log="redflow.metrics.access", access_level=logging.DEBUG
        )
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(timeout=1)
            self._server = None


def start_metrics_server(spec: str | int, observer: MetricsObserver | None = None) -> MetricsServer:
    """Bind ``spec`` (PORT or HOST:PORT) and serve a fresh (or the given) observer's metrics."""
    host, port = parse_listen(spec)
    return MetricsServer(observer or MetricsObserver(), host, port).start()
