"""Schedules as data through leader changes: two ``redflow-gevent worker``
processes, the cron leader SIGKILLed right between a tick's run and the
tick's advance, killed again at a random moment, then every worker down for
12 s (longer than the 10 s grace every tick has) and a new one started.

Invariant: every tick of the schedule from its first to its last starts
exactly one run: none is lost (a tick missed while no worker led is caught
up within the catch-up window) and none starts twice (a tick's run lives
under an idempotency key of the schedule and the tick, which the next
leader finds). The worker app (tests/chaos/apps/schedule_app.py) waits half
a second between a tick's run and its advance, and the first kill waits for
a tick to be inside that window.
"""

from __future__ import annotations

import random
import re
import time

import pytest
from helpers import wait_until

from redflow import create_client
from redflow.core.idempotency import schedule_tick_idempotency_key
from redflow.core.keys import enc
from redflow.core.models import ScheduleField
from tests.chaos.apps.schedule_app import registry as schedule_registry
from tests.chaos.harness import alive, leads_cron
from tests.chaos.kit import wait_terminal

HAD_STARTED = re.compile(r"schedule every-second: the tick of (\d+) had started run")

pytestmark = pytest.mark.slow


@pytest.fixture
def schedule_client(engine, prefix):
    client = create_client(engine.url, prefix=prefix, registry=schedule_registry)
    yield client
    client.close()


def leader_of(spawned):
    """The live worker that leads the cron now (by its log: it took the lock and has not lost it since)."""
    return wait_until(lambda: [w for w in spawned if leads_cron(w)], timeout=30, message="a live worker to lead the cron")[0]


def tick_ms_of_runs(er, client) -> dict[int, str]:
    """tick ms -> run id, from the idempotency keys of the schedule's tick runs."""
    pattern = re.compile(re.escape(f"schedule:{enc('every-second')}:") + r"(\d+)$")
    return {int(m.group(1)): er.get(key) for key in er.scan_iter(f"{client.prefix}:idempo:*", count=1000) if (m := pattern.search(key))}


def inside_the_window(er, client) -> bool:
    """A tick has its run and has not moved on yet: its leader is between the two."""
    tick = er.hget(client.keys.schedule("every-second"), ScheduleField.TICK_MS)
    if not tick:
        return False
    key = client.keys.idempotency("stamp", schedule_tick_idempotency_key("every-second", int(tick)))
    return bool(er.exists(key))


def test_killing_the_leader_mid_tick_and_at_random_loses_no_tick_and_fires_none_twice(engine, er, workers, schedule_client, report):
    client = schedule_client
    spawned = [workers.spawn(engine.url, app="schedule_app"), workers.spawn(engine.url, app="schedule_app")]
    leader_of(spawned)
    client.schedules.create("every-second", workflow="stamp", cron="* * * * * *", overlap="allow", catchup=60, jitter=0.2)
    wait_until(lambda: len(tick_ms_of_runs(er, client)) >= 2, timeout=30, message="the first ticks")

    first = leader_of(spawned)
    wait_until(lambda: inside_the_window(er, client), timeout=30, interval=0.005, message="a tick between its run and its advance")
    first.kill()  # SIGKILL: the tick's run exists, its advance never comes
    spawned.append(workers.spawn(engine.url, app="schedule_app"))
    wait_until(lambda: any(HAD_STARTED.search(w.output()) for w in spawned if alive(w)), timeout=30,
               message="the heir to find the started tick")  # fmt: skip

    time.sleep(random.uniform(1.0, 3.0))
    second = leader_of(spawned)
    second.kill()  # at a random moment
    time.sleep(random.uniform(1.0, 2.0))

    for worker in spawned:
        worker.kill()  # every worker down: the ticks of the next seconds are missed
    down_since = client.now_ms()
    time.sleep(12.0)  # longer than the 10 s every tick has: only the catch-up window (60 s) brings these ticks back
    spawned.append(workers.spawn(engine.url, app="schedule_app"))
    wait_until(lambda: max(tick_ms_of_runs(er, client)) > down_since + 12_000, timeout=30, message="the catch-up after the restart")
    client.schedules.pause("every-second")
    time.sleep(1.0)  # a tick under way moves on (nothing new starts: paused)

    schedule, fired = client.schedules.get("every-second"), tick_ms_of_runs(er, client)
    ticks = sorted(fired)
    missing = sorted(set(range(ticks[0], ticks[-1] + 1, 1000)) - set(ticks))
    assert missing == [], f"ticks lost: {missing}"
    assert len(set(fired.values())) == len(ticks), "a run recorded for two ticks"
    runs = {run.id for run in client.list_runs(tags={"schedule": "every-second"}, limit=10_000)}
    assert runs == set(fired.values()), f"runs that no tick key names (a tick started twice): {sorted(runs - set(fired.values()))}"
    assert schedule.skipped_late == 0 and schedule.fired >= len(ticks) - 1  # a tick whose advance a kill cut is counted by its heir
    wait_terminal(er, client.keys, sorted(runs), timeout=60)
    assert {client.get_run(run_id).status for run_id in runs} == {"succeeded"}
    caught_up = sum(1 for tick in ticks if tick > down_since)
    report(f"{len(ticks)} ticks over {(ticks[-1] - ticks[0]) / 1000:.0f} s, 2 leader kills and a 12 s outage "
           f"({caught_up} ticks after it, caught up), each tick one run")  # fmt: skip
