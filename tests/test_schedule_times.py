"""When a schedule's ticks are due (no Redis): croniter's ticks in a time zone,
through both changes of daylight saving time, a jitter that is the same on
every worker, and the missed ticks a catch-up window skips."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from redflow.core.schedules import MAX_COUNTED_SKIPS, ON_TIME_S, Tick, check_spec, jitter_ms, next_tick, skip_missed

BERLIN = ZoneInfo("Europe/Berlin")


def ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def local(tick_ms: int, zone: ZoneInfo = BERLIN) -> str:
    return datetime.fromtimestamp(tick_ms / 1000, zone).isoformat()


def ticks(cron: str, zone: str | None, start: datetime, count: int, schedule_id: str = "s") -> list[str]:
    spec, out, at = check_spec(cron, zone, "skip", 0, 0), [], ms(start)
    for _ in range(count):
        at = next_tick(schedule_id, spec, at).tick_ms
        out.append(local(at))
    return out


def test_a_daily_tick_in_the_skipped_hour_fires_once_when_the_hour_ends():
    # 2025-03-30: Berlin's clocks jump from 02:00 to 03:00; 02:30 does not exist that day
    assert ticks("30 2 * * *", "Europe/Berlin", datetime(2025, 3, 29, 12, tzinfo=BERLIN), 3) == [
        "2025-03-30T03:00:00+02:00",  # croniter moves it to the first instant after the gap
        "2025-03-31T02:30:00+02:00",
        "2025-04-01T02:30:00+02:00",
    ]


def test_a_daily_tick_in_the_repeated_hour_fires_at_both_of_its_instants():
    # 2025-10-26: Berlin's clocks go back from 03:00 to 02:00; 02:30 happens twice
    assert ticks("30 2 * * *", "Europe/Berlin", datetime(2025, 10, 25, 12, tzinfo=BERLIN), 3) == [
        "2025-10-26T02:30:00+02:00",
        "2025-10-26T02:30:00+01:00",  # croniter: the same wall time an hour later, a tick of its own
        "2025-10-27T02:30:00+01:00",
    ]


def test_an_hourly_schedule_follows_real_hours_across_both_changes():
    spring = ticks("0 * * * *", "Europe/Berlin", datetime(2025, 3, 30, 0, 30, tzinfo=BERLIN), 3)
    assert spring == ["2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T04:00:00+02:00"]
    autumn = ticks("0 * * * *", "Europe/Berlin", datetime(2025, 10, 26, 0, 30, tzinfo=BERLIN), 4)
    assert autumn == ["2025-10-26T01:00:00+02:00", "2025-10-26T02:00:00+02:00", "2025-10-26T02:00:00+01:00", "2025-10-26T03:00:00+01:00"]


def test_a_zone_changes_the_instant_of_the_same_expression():
    start = datetime(2025, 6, 1, 12, tzinfo=ZoneInfo("UTC"))
    spec_utc, spec_tokyo = check_spec("0 9 * * *", None, "skip", 0, 0), check_spec("0 9 * * *", "Asia/Tokyo", "skip", 0, 0)
    assert next_tick("s", spec_utc, ms(start)).tick_ms - next_tick("s", spec_tokyo, ms(start)).tick_ms == 9 * 3600 * 1000


def test_jitter_is_the_same_for_the_same_schedule_and_tick_and_spreads_over_its_range():
    draws = [jitter_ms("nightly", 1_700_000_000_000 + n * 60_000, 30.0) for n in range(500)]
    assert draws == [jitter_ms("nightly", 1_700_000_000_000 + n * 60_000, 30.0) for n in range(500)]  # any worker, any time
    assert all(0 <= d <= 30_000 for d in draws) and len(set(draws)) > 400
    assert min(draws) < 3_000 and max(draws) > 27_000
    assert jitter_ms("other", 1_700_000_000_000, 30.0) != jitter_ms("nightly", 1_700_000_000_000, 30.0)
    assert jitter_ms("nightly", 1_700_000_000_000, 0.0) == 0


def test_the_due_time_is_the_tick_plus_its_jitter():
    spec = check_spec("* * * * *", None, "skip", 0, 20)
    tick = next_tick("s", spec, 1_700_000_000_000)
    assert tick.tick_ms % 60_000 == 0 and tick.due_ms == tick.tick_ms + jitter_ms("s", tick.tick_ms, 20)


def test_ticks_missed_beyond_the_window_are_counted_and_the_first_within_it_is_kept():
    spec = check_spec("* * * * *", None, "allow", 300, 0)
    now = 1_700_000_000_000 - 1_700_000_000_000 % 60_000 + 30_000  # half a minute past a minute
    first = Tick(now - 30_000 - 10 * 60_000, now - 30_000 - 10 * 60_000)  # ten minutes and a half ago
    missed, kept = skip_missed("s", spec, first, now)
    assert missed == 6 and kept.tick_ms == now - 30_000 - 4 * 60_000  # 10.5 .. 5.5 minutes ago missed; 4.5 kept


def test_a_tick_is_never_missed_within_the_on_time_grace_even_with_catchup_zero():
    spec = check_spec("* * * * * *", None, "skip", 0, 0)
    now = 1_700_000_000_000
    grace_ms = round(ON_TIME_S * 1000)
    assert skip_missed("s", spec, Tick(now - grace_ms, now - grace_ms), now) == (0, Tick(now - grace_ms, now - grace_ms))
    missed, kept = skip_missed("s", spec, Tick(now - grace_ms - 2000, now - grace_ms - 2000), now)
    assert missed == 2 and kept.tick_ms == now - grace_ms


def test_a_very_long_gap_is_jumped_over_with_a_bounded_count():
    spec = check_spec("* * * * * *", None, "skip", 5, 0)
    now = 1_700_000_000_000
    missed, kept = skip_missed("s", spec, Tick(now - 30 * 86_400_000, now - 30 * 86_400_000), now)
    assert missed == MAX_COUNTED_SKIPS and now - round(ON_TIME_S * 1000) <= kept.tick_ms <= now - round(ON_TIME_S * 1000) + 1000
