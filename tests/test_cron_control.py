"""Cron triggers at runtime: a pause survives worker restarts and a re-sync by a
newly deployed worker, resume picks up at the next due time without a
catch-up burst, trigger starts one run now."""

from __future__ import annotations

import gevent
import pytest
from helpers import wait_until

from redflow import Registry, define_workflow
from redflow.core.errors import RedflowError
from redflow.ops.control import cron as cron_control


@pytest.fixture
def every_second(registry, prefix, r):
    @define_workflow("beat", registry=registry, cron=[{"id": "beat", "expression": "* * * * * *", "input": {"from": "cron"}}])
    def beat(ctx):
        r.rpush(f"{prefix}:beats", ctx.run.id)
        return ctx.input

    return beat


def beats(r, prefix) -> int:
    return r.llen(f"{prefix}:beats")


@pytest.mark.slow
def test_a_paused_cron_stays_paused_across_worker_restarts_and_a_resync_then_resumes_without_a_burst(
    every_second, client, registry, start, r, prefix
):
    worker = start()
    wait_until(lambda: beats(r, prefix) >= 1, timeout=10)
    (cron_id,) = r.hkeys(client.keys.cron_def())
    change = cron_control.pause(client, cron_id)
    assert change.ok and change.message == "paused"
    assert not cron_control.pause(client, cron_id).ok  # already paused
    gevent.sleep(0.3)  # a fire already under way finishes
    worker.stop()
    fired = beats(r, prefix)

    start()  # a restarted worker syncs its registry
    client.sync_registry(registry)  # and so does a newly deployed one
    gevent.sleep(2.5)
    assert beats(r, prefix) == fired
    assert r.zscore(client.keys.cron_next(), cron_id) is None and r.hget(client.keys.cron_def(), cron_id)
    assert cron_control.paused_ids(client).keys() == {cron_id}

    r.zadd(client.keys.cron_next(), {cron_id: client.now_ms() - 60_000})  # something put it back: still not fired
    gevent.sleep(1.0)
    assert beats(r, prefix) == fired and r.zscore(client.keys.cron_next(), cron_id) is None

    resumed_at = client.now_ms()
    assert cron_control.resume(client, cron_id).ok
    assert resumed_at < r.zscore(client.keys.cron_next(), cron_id) <= resumed_at + 1000  # the next due time, not a missed one
    wait_until(lambda: beats(r, prefix) > fired, timeout=10)
    gevent.sleep(1.5)
    assert beats(r, prefix) - fired <= 4  # about one a second since the resume: no catch-up burst
    assert not cron_control.resume(client, cron_id).ok  # not paused


def test_trigger_starts_one_run_now_with_the_triggers_input_even_when_paused(every_second, client, registry, r):
    client.sync_registry(registry)
    (cron_id,) = r.hkeys(client.keys.cron_def())
    cron_control.pause(client, cron_id)
    first = cron_control.trigger(client, cron_id, "deploy-42")
    again = cron_control.trigger(client, cron_id, "deploy-42")
    other = cron_control.trigger(client, cron_id)
    assert first.run_id == again.run_id != other.run_id
    run = client.get_run(first.run_id)
    assert run.workflow == "beat" and run.input == {"from": "cron"} and run.status == "queued"


def test_unknown_cron_ids_are_clear_errors(client):
    for action in (cron_control.pause, cron_control.resume, cron_control.trigger):
        with pytest.raises(RedflowError, match="no cron trigger 'cron_nope'"):
            action(client, "cron_nope")


def test_a_cron_a_deploy_drops_leaves_no_paused_entry(every_second, client, registry, r):
    client.sync_registry(registry)
    (cron_id,) = r.hkeys(client.keys.cron_def())
    cron_control.pause(client, cron_id)
    deployed = Registry()  # the new version declares no cron

    @define_workflow("beat", registry=deployed)
    def beat(ctx):
        return None

    client.sync_registry(deployed)
    assert r.hlen(client.keys.cron_def()) == 0 and r.hlen(client.keys.cron_paused()) == 0
