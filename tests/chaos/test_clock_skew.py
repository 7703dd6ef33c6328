"""One clock: Redis's. A worker whose wall clock is an hour fast (``faketime
-f +1h`` around the worker process) decides nothing early and loses no cron
tick: delays, retries, the promoter, cron fire times and next times are all
read from Redis's clock (redflow/store/server_clock.py), the worker's own clock
only stamps its log lines.

Each run reports when it really ran, from Redis's ``TIME``; the fire time of
each cron run is in its idempotency key (``cron:<id>:<fire ms>``).
"""

import glob
import re
import signal
import time

import pytest
from helpers import wait_until

from redflow import create_client
from tests.chaos.apps.clock_app import registry as clock_registry

#: Debian's libfaketime, preloaded through ``env`` (which execs, so the worker gets our signals;
#: the ``faketime`` command would stay in between as the parent).
LIBFAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))


@pytest.fixture
def fast():
    """The command prefix that runs a worker with its wall clock one hour fast."""
    if not LIBFAKETIME:
        pytest.fail("libfaketime is not installed: scripts/test installs Debian's faketime package", pytrace=False)
    return ("env", f"LD_PRELOAD={LIBFAKETIME[0]}", "FAKETIME=+1h")


@pytest.fixture
def clock_client(engine, prefix):
    client = create_client(engine.url, prefix=prefix, registry=clock_registry)
    yield client
    client.close()


def test_a_worker_an_hour_fast_runs_no_delayed_run_and_no_retry_before_it_is_due(engine, clock_client, workers, fast):
    skewed = workers.spawn(engine.url, app="clock_app", wrapper=fast)
    assert _log_hour(skewed) == (time.gmtime().tm_hour + 1) % 24 or _log_hour(skewed) == (time.localtime().tm_hour + 1) % 24
    due = {}
    for delay_s in (1.0, 1.5, 2.0, 2.5, 3.0):
        handle = clock_client.run("delayed", delay=delay_s)
        due[handle.id] = clock_client.get_run(handle.id).available_at * 1000
    flaky = clock_client.run("flaky-once")

    wait_until(lambda: clock_client.get_run(flaky.id).status in ("scheduled", "succeeded"), timeout=10)
    run = clock_client.get_run(flaky.id)
    if run.status == "scheduled":  # its retry is due ~250 ms after the failure in Redis's clock, not an hour later
        assert abs(run.available_at * 1000 - clock_client.now_ms()) < 2_000
    assert flaky.result(timeout=10)["ran_at"] >= clock_client.get_run(flaky.id).created_at * 1000
    for run_id, due_ms in due.items():
        ran_at = clock_client.wait_for(run_id, timeout=15).outcome()["ran_at"]
        assert ran_at >= due_ms, f"run {run_id} ran {due_ms - ran_at:.0f} ms early"
        assert ran_at - due_ms < 3_000, f"run {run_id} ran {ran_at - due_ms:.0f} ms late"


def _cron_fires(r, client) -> dict[int, str]:
    """fire ms -> run id, from the cron runs' idempotency keys."""
    fires = {}
    for key in r.scan_iter(f"{client.prefix}:idempo:*", count=1000):
        match = re.search(r"cron:\d+:cron_user_\w+:(\d+)$", key)
        if match:
            fires[int(match.group(1))] = r.get(key)
    return fires


def _log_hour(worker) -> int:
    """The hour the worker's own clock printed in its start-up line (proof that faketime took)."""
    return int(re.search(r"\d{4}-\d\d-\d\d (\d\d):", worker.output()).group(1))


@pytest.mark.slow
def test_cron_led_by_a_fast_worker_then_a_correct_one_fires_every_tick_once_and_none_early(engine, er, clock_client, workers, fast):
    fast = workers.spawn(engine.url, app="clock_app", wrapper=fast)
    wait_until(lambda: er.get(clock_client.keys.lock_cron()), timeout=10, message="the fast worker to lead cron")
    time.sleep(5)
    correct = workers.spawn(engine.url, app="clock_app")
    fast.signal(signal.SIGTERM)  # a graceful stop resigns leadership: the correct worker takes over
    assert fast.wait(timeout=30) == 0
    time.sleep(6)
    correct.signal(signal.SIGTERM)
    assert correct.wait(timeout=30) == 0

    fires = _cron_fires(er, clock_client)
    ticks = sorted(fires)
    assert len(ticks) >= 5, f"too few ticks in 11 s of an every-2-s cron: {ticks}"
    assert [b - a for a, b in zip(ticks, ticks[1:])] == [2000] * (len(ticks) - 1), f"a tick lost or doubled: {ticks}"
    for fire_ms, run_id in fires.items():
        ran_at = clock_client.wait_for(run_id, timeout=10).outcome()["ran_at"]
        assert ran_at >= fire_ms, f"the tick of {fire_ms} ran {fire_ms - ran_at} ms early"
