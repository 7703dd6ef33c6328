"""Schedules as data, their writes: create, update, pause, resume, delete, get and
list, and every bad input refused with a clear error that writes nothing.

(Their ticks: tests/test_schedule_ticks.py; the leader killed: tests/chaos/test_schedule_leader.py.)
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from helpers import keyspace

from redflow import Registry, ScheduleExistsError, ScheduleNotFoundError, create_client, define_workflow
from redflow.core.errors import InputValidationError, RedflowError, UnknownWorkflowError
from redflow.core.schedules import MAX_ID_CHARS, jitter_ms


def needs(field: str):
    """A schema: the input is an object with ``field``."""

    def check(value):
        if not isinstance(value, dict) or field not in value:
            raise ValueError(f"input needs {field!r}")
        return value

    return check


@pytest.fixture
def report(registry):
    @define_workflow("report", registry=registry, schema=needs("kind"))
    def report(ctx):
        return ctx.input

    @define_workflow("other", registry=registry)
    def other(ctx):
        return None

    return report


def test_create_stores_the_schedule_with_its_next_tick_and_list_returns_it(client, report, r):
    before = client.now_ms()
    made = client.schedules.create(
        "nightly", workflow="report", cron="0 2 * * *", timezone="Europe/Berlin", input={"kind": "daily"},
        overlap="cancel_running", catchup=3600.0, jitter=timedelta(seconds=30),
    )  # fmt: skip
    assert (made.id, made.workflow, made.cron, made.timezone, made.paused) == ("nightly", "report", "0 2 * * *", "Europe/Berlin", False)
    assert (made.overlap, made.catchup, made.jitter, made.input) == ("cancel_running", 3600.0, 30.0, {"kind": "daily"})
    assert made.last_run_id is None
    assert before / 1000 < made.next_tick_at <= before / 1000 + 86400 and made.next_tick_at <= made.next_run_at <= made.next_tick_at + 30
    tick_ms = round(made.next_tick_at * 1000)
    assert round(made.next_run_at * 1000) == tick_ms + jitter_ms("nightly", tick_ms, 30.0)  # the hash of the tick, nothing random
    assert client.schedules.list() == [made] and client.schedules.get("nightly") == made
    assert r.zscore(client.keys.schedules_next(), "nightly") == round(made.next_run_at * 1000)
    assert r.zrange(client.keys.schedules(), 0, -1) == ["nightly"]
    assert r.hlen(client.keys.cron_def()) == 0 and r.zcard(client.keys.cron_next()) == 0  # not where other clients' schedulers look


def test_defaults_are_utc_skip_no_catchup_no_jitter_and_a_null_input(client, report, registry):
    @define_workflow("free", registry=registry)
    def free(ctx):
        return None

    made = client.schedules.create("every-minute", workflow="free", cron="* * * * *")
    assert (made.timezone, made.overlap, made.catchup, made.jitter, made.input) == (None, "skip", 0.0, 0.0, None)
    assert made.next_run_at == made.next_tick_at and round(made.next_tick_at) % 60 == 0


def test_update_changes_the_fields_given_and_moves_the_tick_only_when_the_timing_changes(client, report):
    made = client.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "daily"})
    same_tick = client.schedules.update("nightly", input={"kind": "weekly"}, overlap="allow", catchup=60)
    assert (same_tick.input, same_tick.overlap, same_tick.catchup, same_tick.cron) == ({"kind": "weekly"}, "allow", 60.0, "0 2 * * *")
    assert same_tick.next_tick_at == made.next_tick_at and same_tick.updated_at >= made.created_at
    moved = client.schedules.update("nightly", cron="0 3 * * *", timezone="Asia/Tokyo")
    assert moved.timezone == "Asia/Tokyo" and moved.next_tick_at != made.next_tick_at
    assert round(moved.next_tick_at) % 3600 == 0 and moved.input == {"kind": "weekly"}
    back_to_utc = client.schedules.update("nightly", timezone=None)
    assert back_to_utc.timezone is None


def test_pause_takes_the_schedule_off_and_resume_puts_it_back_at_the_next_tick_from_now(client, report, r):
    client.schedules.create("nightly", workflow="report", cron="*/5 * * * * *", input={"kind": "x"})
    assert client.schedules.pause("nightly") is True
    assert client.schedules.pause("nightly") is False  # paused already
    paused = client.schedules.get("nightly")
    assert paused.paused and paused.paused_at is not None and paused.next_run_at is None
    assert r.zscore(client.keys.schedules_next(), "nightly") is None
    now = client.now_ms()
    assert client.schedules.resume("nightly") is True
    assert client.schedules.resume("nightly") is False  # active already
    resumed = client.schedules.get("nightly")
    assert not resumed.paused and now / 1000 < resumed.next_run_at <= now / 1000 + 5
    client.schedules.pause("nightly")
    still_paused = client.schedules.update("nightly", cron="0 4 * * *")  # an update does not resume it
    assert still_paused.paused and still_paused.next_run_at is None and r.zscore(client.keys.schedules_next(), "nightly") is None


def test_delete_removes_every_key_of_the_schedule(client, report, r):
    before = keyspace(r, client.prefix)
    client.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "x"})
    client.schedules.delete("nightly")
    assert keyspace(r, client.prefix) == before
    assert client.schedules.get("nightly") is None and client.schedules.list() == []


def test_list_orders_by_next_run_with_paused_ones_last(client, report):
    client.schedules.create("c-daily", workflow="other", cron="0 0 * * *")
    client.schedules.create("a-secondly", workflow="other", cron="* * * * * *")
    client.schedules.create("b-paused", workflow="other", cron="* * * * * *")
    client.schedules.pause("b-paused")
    assert [s.id for s in client.schedules.list()] == ["a-secondly", "c-daily", "b-paused"]


def test_a_workflow_known_only_from_a_workers_sync_can_be_scheduled(client, report, registry, redis_url, prefix):
    client.sync_registry(registry)
    bare = create_client(redis_url, prefix=prefix, registry=Registry())  # as the command line's client
    try:
        made = bare.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "x"})
        assert made.workflow == "report"
        with pytest.raises(UnknownWorkflowError):
            bare.schedules.create("nope", workflow="never-synced", cron="0 2 * * *")
    finally:
        bare.close()


BAD_CREATES = [
    ({"workflow": "nope"}, UnknownWorkflowError, "Unknown workflow: 'nope'"),
    ({"workflow": ""}, RedflowError, "workflow must be a workflow's name"),
    ({"cron": "every tuesday"}, RedflowError, "invalid cron expression 'every tuesday'"),
    ({"cron": "61 * * * *"}, RedflowError, "invalid cron expression"),
    ({"cron": None}, RedflowError, "cron must be a cron expression"),
    ({"timezone": "Mars/Olympus_Mons"}, RedflowError, "unknown cron timezone 'Mars/Olympus_Mons'"),
    ({"timezone": ""}, RedflowError, "timezone must be an IANA zone name"),
    ({"overlap": "queue"}, RedflowError, "overlap must be one of 'skip', 'allow', 'cancel_running', not 'queue'"),
    ({"overlap": None}, RedflowError, "overlap must be one of"),
    ({"catchup": -1}, RedflowError, "catchup must be a finite number of seconds >= 0, not -1"),
    ({"catchup": float("inf")}, RedflowError, "catchup must be a finite number"),
    ({"catchup": "1h"}, RedflowError, "catchup must be a number of seconds or a timedelta, not str"),
    ({"jitter": -0.5}, RedflowError, "jitter must be a finite number of seconds >= 0, not -0.5"),
    ({"jitter": True}, RedflowError, "jitter must be a number of seconds or a timedelta, not bool"),
    ({"input": {"no": "kind"}}, InputValidationError, "input needs 'kind'"),
    ({"input": {"kind": object()}}, InputValidationError, "not JSON-serializable"),
]


def _id(change: dict) -> str:
    """A test id that is the same in every xdist process (an object's repr holds its address)."""
    return re.sub(r" at 0x[0-9a-f]+", "", str(change))


@pytest.mark.parametrize(("change", "error", "message"), BAD_CREATES, ids=[_id(c[0]) for c in BAD_CREATES])
def test_a_bad_create_is_a_clear_error_that_writes_nothing(client, report, r, change, error, message):
    before = keyspace(r, client.prefix)
    arguments = {"workflow": "report", "cron": "0 2 * * *", "input": {"kind": "daily"}, **change}
    with pytest.raises(error, match=re.escape(message)):
        client.schedules.create("nightly", **arguments)
    assert keyspace(r, client.prefix) == before


@pytest.mark.parametrize("bad_id", ["", None, 42, "x" * (MAX_ID_CHARS + 1), "new\nline"])
def test_a_bad_id_is_refused_before_anything_is_read_or_written(client, report, r, bad_id):
    before = keyspace(r, client.prefix)
    for call in (
        lambda: client.schedules.create(bad_id, workflow="report", cron="0 2 * * *", input={"kind": "x"}),
        lambda: client.schedules.update(bad_id, cron="0 3 * * *"),
        lambda: client.schedules.pause(bad_id),
        lambda: client.schedules.resume(bad_id),
        lambda: client.schedules.trigger(bad_id),
        lambda: client.schedules.delete(bad_id),
        lambda: client.schedules.get(bad_id),
    ):
        with pytest.raises(RedflowError, match="schedule id"):
            call()
    assert keyspace(r, client.prefix) == before


def test_an_id_that_exists_on_create_is_refused_and_the_schedule_is_left_as_it_was(client, report):
    made = client.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "x"})
    with pytest.raises(ScheduleExistsError, match="a schedule 'nightly' exists already"):
        client.schedules.create("nightly", workflow="other", cron="* * * * *")
    assert client.schedules.get("nightly") == made


def test_a_missing_id_is_a_clear_error_on_every_change(client, report, r):
    before = keyspace(r, client.prefix)
    for call in (
        lambda: client.schedules.update("ghost", cron="0 3 * * *"),
        lambda: client.schedules.pause("ghost"),
        lambda: client.schedules.resume("ghost"),
        lambda: client.schedules.trigger("ghost"),
        lambda: client.schedules.delete("ghost"),
    ):
        with pytest.raises(ScheduleNotFoundError, match="no schedule 'ghost'"):
            call()
    assert keyspace(r, client.prefix) == before and client.schedules.get("ghost") is None


BAD_UPDATES = [
    ({}, RedflowError, "update\\(\\) needs at least one of"),
    ({"workflow": "nope"}, UnknownWorkflowError, "Unknown workflow"),
    ({"workflow": "other", "input": {"kind": object()}}, InputValidationError, "not JSON-serializable"),
    ({"input": {"no": "kind"}}, InputValidationError, "input needs .kind."),
    ({"cron": "0 25 * * *"}, RedflowError, "invalid cron expression"),
    ({"timezone": "Nowhere/Land"}, RedflowError, "unknown cron timezone"),
    ({"overlap": "replace"}, RedflowError, "overlap must be one of"),
    ({"catchup": -3}, RedflowError, "catchup must be"),
    ({"jitter": float("nan")}, RedflowError, "jitter must be"),
]


@pytest.mark.parametrize(("change", "error", "message"), BAD_UPDATES, ids=[_id(c[0]) for c in BAD_UPDATES])
def test_a_bad_update_is_a_clear_error_that_changes_nothing(client, report, r, change, error, message):
    client.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "x"})
    before = keyspace(r, client.prefix)
    with pytest.raises(error, match=message):
        client.schedules.update("nightly", **change)
    assert keyspace(r, client.prefix) == before


def test_an_update_to_another_workflow_checks_the_stored_input_against_it(client, report, registry):
    @define_workflow("strict", registry=registry, schema=needs("when"))
    def strict(ctx):
        return None

    client.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "x"})
    with pytest.raises(InputValidationError):
        client.schedules.update("nightly", workflow="strict")
    assert client.schedules.update("nightly", workflow="strict", input={"when": 1}).workflow == "strict"


def test_an_unknown_update_argument_is_a_type_error(client, report):
    client.schedules.create("nightly", workflow="report", cron="0 2 * * *", input={"kind": "x"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'crontab'"):
        client.schedules.update("nightly", crontab="0 3 * * *")
