"""Schedules as data, their ticks: each due tick starts one run, or is skipped and
counted (missed beyond the catch-up window, or by the overlap policy); trigger,
pause and resume; code-defined cron beside them; a leader that dies between a
tick's run and its advance.

Time is moved, not waited for: a test writes a schedule's stored next tick
(``tickMs``, ``dueMs`` and its ``schedules:next`` entry) to a time in Redis's
clock, as if that much time had passed, and the leader does the rest.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import gevent
import pytest
from helpers import wait_until

from redflow import Registry, define_workflow
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.keys import enc
from redflow.core.models import ScheduleField
from redflow.core.schedules import jitter_ms
from redflow.engine.schedules import ScheduleTicker
from redflow.store.requests import TickDone
from redflow.store.targets import Targets

YEARLY = "0 0 1 1 *"  # a tick only when a test moves it


@pytest.fixture
def apps(registry, r, prefix):
    """``tick``: records its run; ``slow``: records its run, then waits until released."""

    @define_workflow("tick", registry=registry)
    def tick(ctx):
        r.rpush(f"{prefix}:ran", ctx.run.id)
        return ctx.input

    @define_workflow("slow", registry=registry)
    def slow(ctx):
        r.rpush(f"{prefix}:started", ctx.run.id)
        while not r.exists(f"{prefix}:release"):
            gevent.sleep(0.02)
        return ctx.input

    return registry


def move_tick(r, client, schedule_id: str, tick_ms: int, due_ms: int | None = None) -> int:
    """The schedule's next tick becomes ``tick_ms`` (due at ``due_ms``): as if the clock had moved."""
    due = tick_ms if due_ms is None else due_ms
    r.hset(client.keys.schedule(schedule_id), mapping={ScheduleField.TICK_MS: tick_ms, ScheduleField.DUE_MS: due})
    r.zadd(client.keys.schedules_next(), {schedule_id: due})
    return tick_ms


def done_with(r, client, schedule_id: str, tick_ms: int) -> None:
    key = client.keys.schedule(schedule_id)
    wait_until(lambda: r.hget(key, ScheduleField.LAST_TICK_MS) == str(tick_ms), timeout=10, message=f"the leader to do tick {tick_ms}")


def fired_ticks(r, client, schedule_id: str) -> dict[int, str]:
    """tick ms -> run id, from the idempotency keys of the schedule's tick runs."""
    pattern = re.compile(re.escape(f"schedule:{enc(schedule_id)}:") + r"(\d+)$")
    found = {}
    for key in r.scan_iter(f"{client.prefix}:*idempo:*", count=1000):
        match = pattern.search(key)
        if match:
            found[int(match.group(1))] = r.get(key)
    return found


def runs_of(client, schedule_id: str) -> list[str]:
    return [run.id for run in client.list_runs(tags={"schedule": schedule_id}, limit=1000)]


def test_a_due_tick_starts_one_run_with_the_input_and_tag_and_moves_to_the_next_tick(client, apps, start, r):
    client.schedules.create("yearly", workflow="tick", cron=YEARLY, input={"n": 1})
    start()
    tick = move_tick(r, client, "yearly", client.now_ms() - 1000)
    done_with(r, client, "yearly", tick)
    schedule = client.schedules.get("yearly")
    (run_id,) = runs_of(client, "yearly")
    assert fired_ticks(r, client, "yearly") == {tick: run_id} and schedule.last_run_id == run_id
    assert client.wait_for(run_id, timeout=10).outcome() == {"n": 1}
    run = client.get_run(run_id)
    assert run.workflow == "tick" and run.input == {"n": 1} and run.tags == {"schedule": "yearly"}
    assert (schedule.fired, schedule.skipped_late, schedule.skipped_overlap, schedule.last_error) == (1, 0, 0, None)
    assert schedule.last_tick_at * 1000 == tick
    assert datetime.fromtimestamp(schedule.next_tick_at, UTC).strftime("%m-%d %H:%M") == "01-01 00:00"
    assert r.zscore(client.keys.schedules_next(), "yearly") == schedule.next_run_at * 1000


def test_overlap_skip_starts_no_tick_while_the_last_run_is_unfinished(client, apps, start, r, prefix):
    client.schedules.create("s", workflow="slow", cron=YEARLY, overlap="skip")
    start()
    first = move_tick(r, client, "s", client.now_ms() - 2000)
    done_with(r, client, "s", first)
    wait_until(lambda: r.llen(f"{prefix}:started") == 1)
    second = move_tick(r, client, "s", client.now_ms() - 1000)
    done_with(r, client, "s", second)
    schedule = client.schedules.get("s")
    assert (schedule.fired, schedule.skipped_overlap) == (1, 1) and list(fired_ticks(r, client, "s")) == [first]
    r.set(f"{prefix}:release", 1)
    client.wait_for(schedule.last_run_id, timeout=10)
    third = move_tick(r, client, "s", client.now_ms() - 500)  # its last run has ended: this tick starts
    done_with(r, client, "s", third)
    assert sorted(fired_ticks(r, client, "s")) == [first, third] and client.schedules.get("s").fired == 2


def test_overlap_allow_starts_every_tick_beside_the_unfinished_ones(client, apps, start, r, prefix):
    client.schedules.create("a", workflow="slow", cron=YEARLY, overlap="allow")
    start(concurrency=4)
    ticks = []
    for ago_ms in (3000, 2000, 1000):
        ticks.append(move_tick(r, client, "a", client.now_ms() - ago_ms))
        done_with(r, client, "a", ticks[-1])
    wait_until(lambda: r.llen(f"{prefix}:started") == 3, timeout=15)  # (5 s was too short on a loaded cluster, once)
    assert sorted(fired_ticks(r, client, "a")) == ticks and {client.get_run(i).status for i in runs_of(client, "a")} == {"running"}
    r.set(f"{prefix}:release", 1)


def test_overlap_cancel_running_cancels_the_unfinished_last_run_then_starts(client, apps, start, r, prefix):
    client.schedules.create("c", workflow="slow", cron=YEARLY, overlap="cancel_running")
    start(concurrency=4)
    first = move_tick(r, client, "c", client.now_ms() - 2000)
    done_with(r, client, "c", first)
    wait_until(lambda: r.llen(f"{prefix}:started") == 1, timeout=15)
    first_run = client.schedules.get("c").last_run_id
    second = move_tick(r, client, "c", client.now_ms() - 1000)
    done_with(r, client, "c", second)
    second_run = client.schedules.get("c").last_run_id
    assert second_run != first_run and fired_ticks(r, client, "c") == {first: first_run, second: second_run}
    canceled = client.wait_for(first_run, timeout=10)
    assert canceled.status == "canceled" and "overlap=cancel_running" in client.get_run(first_run).cancel_reason
    wait_until(lambda: r.llen(f"{prefix}:started") == 2, timeout=15)
    assert client.get_run(second_run).status == "running"
    r.set(f"{prefix}:release", 1)
    assert client.wait_for(second_run, timeout=10).status == "succeeded"


def test_catchup_after_downtime_starts_each_tick_of_the_window_once_and_counts_the_older_ones(client, apps, registry, start, r):
    client.schedules.create("catch", workflow="tick", cron="* * * * *", overlap="allow", catchup=300)
    now = client.now_ms()
    first = now - now % 60_000 - 10 * 60_000  # the workers were down for the last ten minutes
    move_tick(r, client, "catch", first)
    start(concurrency=4)
    wait_until(lambda: client.schedules.get("catch").next_tick_at * 1000 > client.now_ms(), timeout=20, message="the catch-up")
    client.schedules.pause("catch")  # nothing more: the ticks below are all there are
    schedule, fired = client.schedules.get("catch"), fired_ticks(r, client, "catch")
    ticks = sorted(fired)
    assert ticks[0] == first + schedule.skipped_late * 60_000, "the missed ticks are the oldest ones"
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 60_000)) and len(set(fired.values())) == len(ticks) == schedule.fired
    assert sorted(runs_of(client, "catch")) == sorted(fired.values())
    assert ticks[0] >= now - 300_000 and first + (schedule.skipped_late - 1) * 60_000 < client.now_ms() - 300_000
    # Ten or eleven minutes of ticks (twelve when a minute ends before the leader's first pass),
    # about half of them older than the window: which half, the line above says exactly.
    assert 4 <= schedule.skipped_late <= 7 and 4 <= schedule.fired <= 7 and 10 <= schedule.skipped_late + schedule.fired <= 12


def test_catchup_zero_skips_every_tick_missed_by_more_than_the_on_time_grace(client, apps, start, r):
    client.schedules.create("none", workflow="tick", cron="* * * * *", overlap="allow", catchup=0)
    now = client.now_ms()
    first = now - now % 60_000 - 10 * 60_000
    move_tick(r, client, "none", first)
    start()
    wait_until(lambda: client.schedules.get("none").next_tick_at * 1000 > client.now_ms(), timeout=20)
    client.schedules.pause("none")
    schedule, fired = client.schedules.get("none"), fired_ticks(r, client, "none")
    assert schedule.skipped_late >= 10 and len(fired) == schedule.fired <= 1
    assert all(tick >= now - 10_000 for tick in fired), "only a tick within the 10 s grace may start"


def test_a_long_outage_of_a_frequent_schedule_is_counted_and_skipped_without_a_burst(client, apps, start, r):
    client.schedules.create("secondly", workflow="tick", cron="* * * * * *", catchup=5)
    move_tick(r, client, "secondly", client.now_ms() - 3 * 86_400_000)  # three days of ticks, one a second
    start()
    wait_until(lambda: client.schedules.get("secondly").skipped_late >= 1000, timeout=20)
    client.schedules.pause("secondly")
    assert len(fired_ticks(r, client, "secondly")) <= 20  # the last few seconds at most, not days of them


@pytest.mark.slow
def test_jitter_delays_each_tick_by_its_hash_and_a_new_leader_keeps_the_due_time(client, apps, start, r, registry):
    client.schedules.create("j", workflow="tick", cron="*/2 * * * * *", jitter=1.5, overlap="allow")
    leader = start()
    wait_until(lambda: len(fired_ticks(r, client, "j")) >= 2, timeout=15)
    follower = start()
    leader.stop()  # a graceful stop resigns: the other worker takes over
    wait_until(lambda: len(fired_ticks(r, client, "j")) >= 5, timeout=20)
    follower.stop()
    schedule, fired = client.schedules.get("j"), fired_ticks(r, client, "j")
    ticks = sorted(fired)
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 2000)), "a tick lost or doubled across the leader change"
    delays = [jitter_ms("j", tick, 1.5) for tick in ticks]
    for tick, delay in zip(ticks, delays):
        run = client.get_run(fired[tick])
        assert run.created_at * 1000 >= tick + delay, "a tick started before its jittered due time"
    assert len(set(delays)) > 1 and all(0 <= d <= 1500 for d in delays)
    assert schedule.next_run_at * 1000 == schedule.next_tick_at * 1000 + jitter_ms("j", round(schedule.next_tick_at * 1000), 1.5)


def test_trigger_starts_one_run_now_whatever_the_overlap_and_it_becomes_the_last_run(client, apps, start, r, prefix):
    client.schedules.create("t", workflow="slow", cron=YEARLY, input={"from": "t"}, overlap="skip")
    client.schedules.pause("t")
    handle = client.schedules.trigger("t", trigger_id="deploy-42")
    again = client.schedules.trigger("t", trigger_id="deploy-42")
    assert again.id == handle.id and handle.status() == "queued"
    run = client.get_run(handle.id)
    assert run.input == {"from": "t"} and run.tags == {"schedule": "t"}
    assert client.schedules.get("t").last_run_id == handle.id and client.schedules.get("t").paused
    start(concurrency=4)
    wait_until(lambda: r.llen(f"{prefix}:started") == 1)
    other = client.schedules.trigger("t")  # paused, overlap skip, its last run unfinished: an operator asked
    assert other.id != handle.id and client.schedules.get("t").last_run_id == other.id
    client.schedules.resume("t")
    tick = move_tick(r, client, "t", client.now_ms() - 1000)
    done_with(r, client, "t", tick)
    assert client.schedules.get("t").skipped_overlap == 1 and fired_ticks(r, client, "t") == {}  # the triggered run is unfinished
    r.set(f"{prefix}:release", 1)


def test_a_paused_schedule_fires_nothing_even_when_its_next_entry_comes_back(client, apps, start, r):
    client.schedules.create("p", workflow="tick", cron="* * * * * *")
    client.schedules.pause("p")
    start()
    r.zadd(client.keys.schedules_next(), {"p": client.now_ms() - 1000})  # something put it back
    wait_until(lambda: r.zscore(client.keys.schedules_next(), "p") is None, timeout=5)
    gevent.sleep(1.2)
    assert fired_ticks(r, client, "p") == {}
    resumed_at = client.now_ms()
    client.schedules.resume("p")
    wait_until(lambda: fired_ticks(r, client, "p"), timeout=10)
    assert min(fired_ticks(r, client, "p")) > resumed_at  # from the next tick on: nothing made up


def test_code_cron_and_data_schedules_fire_side_by_side(client, apps, registry, start, r, prefix):
    @define_workflow("coded", registry=registry, cron=[{"id": "beat", "expression": "* * * * * *"}])
    def coded(ctx):
        r.rpush(f"{prefix}:coded", ctx.run.id)

    client.schedules.create("data", workflow="tick", cron="* * * * * *", overlap="allow")
    start()
    wait_until(lambda: r.llen(f"{prefix}:coded") >= 3 and len(fired_ticks(r, client, "data")) >= 3, timeout=15)
    assert r.hlen(client.keys.cron_def()) == 1 and "data" not in r.hkeys(client.keys.cron_def())
    assert all(run.workflow == "tick" for run in client.list_runs(tags={"schedule": "data"}))


def test_a_tick_started_by_a_leader_that_died_before_moving_on_is_recorded_not_started_again(client, apps, r, registry, monkeypatch):
    """The leader's crash between a tick's run and its advance, forced: the next
    leader finds the run under the tick's key, even a run that has ended
    (canceled) since and with overlap="skip" and an unfinished earlier run."""
    client.sync_registry(registry)
    client.schedules.create("k", workflow="tick", cron=YEARLY, overlap="skip")
    earlier = client.schedules.trigger("k")  # unfinished (no worker): "skip" would skip a new tick
    tick = move_tick(r, client, "k", client.now_ms() - 1000)
    dying, heir = ScheduleTicker(client.store, client.targets), ScheduleTicker(client.store, client.targets)

    class Died(Exception):
        pass

    def die(done: TickDone) -> None:
        raise Died

    monkeypatch.setattr(dying, "_done", die)  # the crash: after the tick's run, before the advance
    r.hset(client.keys.schedule("k"), ScheduleField.LAST_RUN_ID, "")  # the dying leader saw no overlap
    with pytest.raises(Died):
        dying.tick("k", client.now_ms())
    r.hset(client.keys.schedule("k"), ScheduleField.LAST_RUN_ID, earlier.id)
    (started,) = fired_ticks(r, client, "k").values()
    assert client.cancel(started)  # and its run has ended before the heir comes
    heir.tick("k", client.now_ms())
    schedule = client.schedules.get("k")
    assert fired_ticks(r, client, "k") == {tick: started} and sorted(runs_of(client, "k")) == sorted([started, earlier.id])
    assert (schedule.fired, schedule.skipped_overlap, schedule.last_run_id) == (1, 0, started)
    assert schedule.last_tick_at * 1000 == tick and schedule.next_tick_at * 1000 > client.now_ms()


def test_a_stale_leader_that_wakes_after_its_heir_moved_on_changes_nothing(client, apps, r, registry, monkeypatch):
    client.sync_registry(registry)
    client.schedules.create("w", workflow="tick", cron=YEARLY, overlap="allow")
    tick = move_tick(r, client, "w", client.now_ms() - 1000)
    stale, heir = ScheduleTicker(client.store, client.targets), ScheduleTicker(client.store, client.targets)
    fields, stale_now = client.redis.hgetall(client.keys.schedule("w")), client.now_ms()  # read before it froze
    heir.tick("w", client.now_ms() + 1)
    after_heir = client.schedules.get("w")
    with monkeypatch.context() as patch:
        patch.setattr(client.redis, "hgetall", lambda key: fields)  # it goes on from its stale read
        stale.tick("w", stale_now)
    assert list(fired_ticks(r, client, "w")) == [tick] and len(runs_of(client, "w")) == 1
    assert client.schedules.get("w") == after_heir


def test_a_stale_leader_frozen_after_looking_for_the_ticks_run_starts_none_even_if_that_run_ended(client, apps, r, registry, monkeypatch):
    """The idempotency key of a tick's run keeps whatever run it names (a failed or
    canceled one too), so a leader that looked for the run before its heir started
    it, then woke, starts no second run for the tick."""
    client.sync_registry(registry)
    client.schedules.create("f", workflow="tick", cron=YEARLY, overlap="allow")
    tick = move_tick(r, client, "f", client.now_ms() - 1000)
    stale, heir = ScheduleTicker(client.store, client.targets), ScheduleTicker(client.store, client.targets)
    fields, stale_now = client.redis.hgetall(client.keys.schedule("f")), client.now_ms()
    heir.tick("f", client.now_ms() + 1)
    (started,) = fired_ticks(r, client, "f").values()
    assert client.cancel(started)
    with monkeypatch.context() as patch:
        patch.setattr(client.redis, "hgetall", lambda key: fields)
        patch.setattr(stale, "_started_already", lambda *args: "")  # it looked before the heir started the run
        stale.tick("f", stale_now)
    assert fired_ticks(r, client, "f") == {tick: started} and runs_of(client, "f") == [started]


def test_an_update_during_a_tick_wins_over_the_leaders_advance(client, apps, r, registry, monkeypatch):
    client.sync_registry(registry)
    client.schedules.create("u", workflow="tick", cron=YEARLY)
    tick = move_tick(r, client, "u", client.now_ms() - 1000)
    ticker = ScheduleTicker(client.store, client.targets)
    fields = client.redis.hgetall(client.keys.schedule("u"))
    updated = client.schedules.update("u", cron="0 12 * * *")
    with monkeypatch.context() as patch:
        patch.setattr(client.redis, "hgetall", lambda key: fields)  # the leader read before the update
        ticker.tick("u", client.now_ms())
    after = client.schedules.get("u")
    assert after.next_tick_at == updated.next_tick_at and after.cron == "0 12 * * *"
    assert after.last_run_id == fired_ticks(r, client, "u")[tick]  # the run it started is recorded all the same
    assert after.fired == 0 and after.last_tick_at is None


def test_a_tick_of_a_workflow_no_one_knows_starts_nothing_says_why_and_moves_on(client, apps, r):
    client.schedules.create("gone", workflow="tick", cron=YEARLY)
    ticker = ScheduleTicker(client.store, Targets(client.redis, client.keys, client.store.payloads, Registry()))  # a worker without it
    tick = move_tick(r, client, "gone", client.now_ms() - 1000)
    ticker.tick("gone", client.now_ms())
    schedule = client.schedules.get("gone")
    assert schedule.last_error.startswith("Unknown workflow: 'tick'"), schedule.last_error
    assert schedule.last_tick_at * 1000 == tick
    assert schedule.fired == 0 and schedule.next_tick_at * 1000 > client.now_ms() and fired_ticks(r, client, "gone") == {}


def test_a_schedule_hash_that_does_not_read_is_taken_off_named_and_deletable(client, apps, r, caplog):
    client.schedules.create("broken", workflow="tick", cron=YEARLY)
    client.schedules.create("fine", workflow="tick", cron=YEARLY)
    r.hset(client.keys.schedule("broken"), ScheduleField.CATCHUP_MS, "soon")  # written by hand
    move_tick(r, client, "broken", client.now_ms() - 1000)
    fine = move_tick(r, client, "fine", client.now_ms() - 1000)
    ScheduleTicker(client.store, client.targets).step()
    assert r.zscore(client.keys.schedules_next(), "broken") is None and "schedule broken taken off the schedule" in caplog.text
    assert list(fired_ticks(r, client, "fine")) == [fine]  # the others fire all the same
    with pytest.raises(CorruptDataError, match="schedule 'broken' field catchupMs is not a number of ms"):
        client.schedules.list()
    client.schedules.delete("broken")
    assert [s.id for s in client.schedules.list()] == ["fine"]


def test_a_create_refuses_an_expression_with_no_tick_and_a_leader_takes_one_off_until_updated(client, apps, r):
    with pytest.raises(RedflowError, match="invalid cron expression '0 0 31 2 \\*'"):
        client.schedules.create("never", workflow="tick", cron="0 0 31 2 *")  # February 31st
    client.schedules.create("feb", workflow="tick", cron=YEARLY)
    r.hset(client.keys.schedule("feb"), ScheduleField.CRON, "0 0 31 2 *")  # as an older version could have stored it
    move_tick(r, client, "feb", client.now_ms() - 1000)
    ScheduleTicker(client.store, client.targets).step()
    schedule = client.schedules.get("feb")
    assert schedule.next_run_at is None and schedule.last_error.startswith("no next tick: invalid cron expression")
    assert r.zcard(client.keys.schedules_next()) == 0 and fired_ticks(r, client, "feb") == {}
    assert client.schedules.update("feb", cron="0 0 1 3 *").next_run_at is not None


def test_a_deleted_schedules_stray_next_entry_is_dropped(client, apps, r):
    r.zadd(client.keys.schedules_next(), {"ghost": client.now_ms() - 1000})
    ScheduleTicker(client.store, client.targets).step()
    assert r.zcard(client.keys.schedules_next()) == 0


def test_the_leader_step_says_how_long_to_sleep(client, apps):
    ticker = ScheduleTicker(client.store, client.targets)
    assert ticker.step() is None
    made = client.schedules.create("later", workflow="tick", cron=YEARLY)
    wait_s = ticker.step()
    assert wait_s is not None and 0 < wait_s and abs(wait_s - (made.next_run_at - client.now_ms() / 1000)) < 5
