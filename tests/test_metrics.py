"""Prometheus metrics: the observer on a real worker, its endpoint, and `worker --metrics-port`."""

import socket
import subprocess
import sys
import urllib.request

import gevent
import pytest
from helpers import CLI, WorkerProcess, wait_until
from prometheus_client.parser import text_string_to_metric_families

from redflow import NonRetryableError, RedflowError, define_workflow
from redflow.ops.observe.metrics import MetricsObserver, MetricsServer, parse_listen, start_metrics_server
from redflow.testing import free_port


def scrape(url):
    """{(name, frozenset(labels)): value} of every sample at ``url``."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_the_worker_metrics_count_outcomes_durations_claims_in_flight_and_lost_leases(start, registry, client, r):
    @define_workflow("ok", registry=registry)
    def ok(ctx):
        return ctx.step.run("one", lambda: 1)

    @define_workflow("flaky", registry=registry, max_attempts=2)
    def flaky(ctx):
        if ctx.run.attempt == 1:
            raise RuntimeError("first attempt fails")
        return "second"

    @define_workflow("bad", registry=registry)
    def bad(ctx):
        raise NonRetryableError("no")

    @define_workflow("slow", registry=registry)
    def slow(ctx):
        gevent.sleep(ctx.input)

    observer = MetricsObserver()
    metrics = MetricsServer(observer, port=0).start()
    try:
        worker = start(observers=[observer], concurrency=4, lease_ms=400)
        observer.attach(worker)
        assert [client.run("ok").result(10) for _ in range(3)] == [1, 1, 1]
        assert client.run("flaky").result(10) == "second"
        with pytest.raises(RedflowError):
            client.run("bad").result(10)
        held = client.run("slow", 30)

        def settled():  # observers run just after a result is out: wait for the last one
            samples = scrape(metrics.url)
            done = value(samples, "redflow_runs_failed_total", workflow="bad") == 1
            return samples if done and value(samples, "redflow_in_flight_runs") == 1 else None

        samples = wait_until(settled, timeout=10)
        assert value(samples, "redflow_runs_started_total", workflow="ok") == 3
        assert value(samples, "redflow_runs_succeeded_total", workflow="ok") == 3
        assert value(samples, "redflow_runs_retried_total", workflow="flaky") == 1
        assert value(samples, "redflow_runs_succeeded_total", workflow="flaky") == 1
        assert value(samples, "redflow_runs_started_total", workflow="flaky") == 1  # a retry is not a new run
        assert value(samples, "redflow_runs_failed_total", workflow="bad") == 1
        assert value(samples, "redflow_run_duration_seconds_count", workflow="ok", outcome="succeeded") == 3
        assert value(samples, "redflow_step_duration_seconds_count", workflow="ok", status="succeeded") == 3
        assert value(samples, "redflow_claim_latency_seconds_count", queue="default") >= 6
        assert value(samples, "redflow_in_flight_runs") == 1  # the slow run, read from the worker at scrape time
        assert value(samples, "redflow_slots") == 4

        wait_until(lambda: r.get(client.keys.run_lease(held.id)), timeout=10)
        r.delete(client.keys.run_lease(held.id))  # as if another worker had taken it over
        wait_until(lambda: value(scrape(metrics.url), "redflow_lease_renewals_lost_total") == 1, timeout=10)
        wait_until(lambda: value(scrape(metrics.url), "redflow_reaper_recoveries_total", queue="default") >= 1, timeout=10)
        client.cancel(held.id)
        wait_until(lambda: value(scrape(metrics.url), "redflow_runs_canceled_total", workflow="slow") == 1, timeout=10)
    finally:
        metrics.stop()


def test_the_metrics_count_the_live_workers_of_the_prefix_and_their_busy_slots(start, registry, client):
    @define_workflow("nap", registry=registry)
    def nap(ctx):
        gevent.sleep(30)

    observer = MetricsObserver()
    metrics = MetricsServer(observer, port=0).start()
    try:
        observer.attach(start(observers=[observer], concurrency=3, heartbeat_s=0.1))
        start(concurrency=5, heartbeat_s=0.1)  # another worker of the prefix: counted too
        handle = client.run("nap")
        wait_until(lambda: value(scrape(metrics.url), "redflow_workers_slots_busy") == 1, timeout=10)
        samples = scrape(metrics.url)
        assert value(samples, "redflow_workers", state="alive") == 2 and value(samples, "redflow_workers", state="lost") == 0
        assert value(samples, "redflow_workers_slots") == 8
        client.cancel(handle.id)
    finally:
        metrics.stop()


def test_listen_addresses_are_parsed_and_bad_ones_refused():
    assert parse_listen("9100") == ("127.0.0.1", 9100)
    assert parse_listen(9100) == ("127.0.0.1", 9100)
    assert parse_listen("0.0.0.0:9100") == ("0.0.0.0", 9100)
    assert parse_listen("[::1]:9100") == ("::1", 9100)
    for bad in ("nope", "host:", "70000", "-1"):
        with pytest.raises(RedflowError, match="metrics"):
            parse_listen(bad)


def test_a_port_in_use_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RedflowError, match="cannot serve metrics on 127.0.0.1"):
            start_metrics_server(taken.getsockname()[1])


def test_worker_command_serves_metrics_and_refuses_a_bad_metrics_port(redis_url, prefix, cli_client):
    port = free_port()
    with WorkerProcess(redis_url, prefix, "--metrics-port", str(port)) as worker:
        url = f"http://127.0.0.1:{port}/metrics"
        handle = cli_client.run("count", {"key": f"{prefix}:seen", "n": 1})
        assert handle.result(20) == 2
        wait_until(lambda: value(scrape(url), "redflow_runs_succeeded_total", workflow="count") == 1, timeout=10)
        assert value(scrape(url), "redflow_slots") == 4
        assert worker.stop() == 0
    bad = subprocess.run([CLI, "worker", "--redis-url", redis_url, "--metrics-port", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--metrics-port: metrics address must be PORT or HOST:PORT" in bad.stderr


def test_without_prometheus_client_the_metrics_flag_says_how_to_get_it(redis_url):
    code = "import sys; sys.modules['prometheus_client'] = None; from redflow.ops.cli import main; main(sys.argv[1:])"
    cmd = [sys.executable, "-c", code, "worker", "--redis-url", redis_url, "--metrics-port", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "pip install 'redflow-gevent[metrics]'" in done.stderr
