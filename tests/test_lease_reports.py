"""A lost-lease warning and metric mean that a lease was lost, and nothing else.

The keeper sends renewals and "running" step markers in one pipeline per
tick; when a run settles (and releases its lease) while that pipeline is in
flight, the refused renewal or marker is the run being over, not a lost
lease. Operators alert on the warning and on
``redflow_lease_renewals_lost_total``, so those must stay silent then, and
still speak up for a real loss (tests/test_metrics.py deletes a lease under
a running run and sees the counter go to 1; the chaos suite's lease-loss
tests see the warning).
"""

import logging

import pytest
from gevent.event import Event
from helpers import wait_until
from prometheus_client.parser import text_string_to_metric_families

from redflow import define_workflow
from redflow.ops.observe.metrics import MetricsObserver


def _lost_leases_metric(observer: MetricsObserver) -> float:
    from prometheus_client import generate_latest

    text = generate_latest(observer.registry).decode()
    samples = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}
    return samples["redflow_lease_renewals_lost_total"]


@pytest.mark.heavy
def test_a_drain_of_2000_parent_and_child_runs_at_c50_reports_no_lost_lease(start, registry, client, caplog):
    @define_workflow("parent", registry=registry)
    def parent(ctx):
        child = ctx.step.run_workflow("render", "child", {"n": ctx.input["n"]})
        return {"child": child}

    @define_workflow("child", registry=registry)
    def child(ctx):
        return ctx.step.run("double", lambda: ctx.input["n"] * 2)

    observer = MetricsObserver()
    caplog.set_level(logging.WARNING, logger="redflow")
    worker = start(observers=[observer], concurrency=50, lease_ms=5000, cancel_poll_ms=20)
    handles = client.run_many("parent", [{"n": n} for n in range(2000)])
    outputs = [h.result(timeout=120) for h in handles]

    assert outputs == [{"child": 2 * n} for n in range(2000)]
    # A result is readable as soon as the settle script ran; the worker counts it when the reply comes back.
    wait_until(lambda: worker.stats["succeeded"] == 4000, timeout=5)
    assert worker.stats["abandoned"] == 0
    assert [r.getMessage() for r in caplog.records if "lease lost" in r.getMessage()] == []
    assert worker.keeper.renewals_lost == 0
    assert _lost_leases_metric(observer) == 0


def test_a_real_lease_loss_under_the_same_worker_reports_one_warning_and_counts_one(start, registry, client, r, caplog):
    """The counterpart of the drain above: the same observer, log capture and
    keeper, and a lease that is really lost (deleted under a running step, as
    if another worker had taken the run over)."""
    released = Event()

    @define_workflow("held", registry=registry)
    def held(ctx):
        return ctx.step.run("wait", lambda: released.wait(10))

    observer = MetricsObserver()
    caplog.set_level(logging.WARNING, logger="redflow")
    # A lease of 2 s, not 0.4: the run's next attempt (the reaper hands it on at once) must not lose its
    # own lease to a keeper starved of CPU for a few hundred ms, which would be a second, real, loss.
    worker = start(observers=[observer], concurrency=50, lease_ms=2000, cancel_poll_ms=20)
    handle = client.run("held")
    wait_until(lambda: r.get(client.keys.run_lease(handle.id)), timeout=10)
    r.delete(client.keys.run_lease(handle.id))
    wait_until(lambda: worker.keeper.renewals_lost == 1, timeout=10)
    released.set()

    lost = [rec.getMessage() for rec in caplog.records if "lease lost" in rec.getMessage()]
    assert lost == [lost[0]] and lost[0].startswith(f"lease lost for run {handle.id}")
    assert _lost_leases_metric(observer) == 1
    assert handle.result(timeout=20) is True  # the reaper hands the run on, and it still ends once
