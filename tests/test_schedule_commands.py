"""``redflow-gevent schedules list|create|update|pause|resume|trigger|delete``:
what each prints, and the exit rule (0 done, 1 the answer is no, 2 a value the
command cannot use, refused before anything is written)."""

from __future__ import annotations

import orjson
import pytest
from helpers import keyspace

from redflow import define_workflow
from redflow.ops.cli.values import EXIT_NO, EXIT_USAGE


@pytest.fixture
def synced(registry, client):
    """A workflow a worker synced (the command line knows workflows from Redis only)."""

    @define_workflow("report", registry=registry)
    def report(ctx):
        return ctx.input

    client.sync_registry(registry)
    return report


def test_create_list_update_pause_resume_trigger_and_delete_on_the_command_line(cli, synced, client):
    code, out, err = cli("schedules", "create", "nightly", "--workflow", "report", "--cron", "0 2 * * *", "--timezone", "Europe/Berlin",
                         "--input", '{"kind": "daily"}', "--overlap", "allow", "--catchup", "1h", "--jitter", "30s")  # fmt: skip
    assert (code, err) == (0, "") and out.startswith("nightly: created; next run at ") and out.endswith(" UTC\n")
    made = client.schedules.get("nightly")
    assert (made.timezone, made.input, made.overlap) == ("Europe/Berlin", {"kind": "daily"}, "allow")
    assert (made.catchup, made.jitter) == (3600.0, 30.0)

    code, out, _ = cli("schedules", "list")
    header, row = out.splitlines()
    assert code == 0 and header.split()[:4] == ["ID", "WORKFLOW", "CRON", "TIMEZONE"]
    assert row.split()[:2] == ["nightly", "report"] and "Europe/Berlin" in row and "allow" in row and "1h" in row
    code, out, _ = cli("schedules", "list", "--json")
    (listed,) = orjson.loads(out)
    assert code == 0 and listed["id"] == "nightly" and listed["next_run_at"] == made.next_run_at and listed["paused"] is False

    code, out, _ = cli("schedules", "update", "nightly", "--cron", "0 3 * * *", "--input", "null")
    assert code == 0 and out.startswith("nightly: updated; next run at")
    updated = client.schedules.get("nightly")
    assert (updated.cron, updated.input, updated.timezone, updated.overlap) == ("0 3 * * *", None, "Europe/Berlin", "allow")

    assert cli("schedules", "pause", "nightly") == (0, "nightly: paused\n", "")
    assert cli("schedules", "pause", "nightly")[:2] == (EXIT_NO, "nightly: already paused\n")
    code, out, _ = cli("schedules", "list")
    assert "paused" in out.splitlines()[1]
    code, out, _ = cli("schedules", "trigger", "nightly", "--trigger-id", "t1", "--json")
    run_id = orjson.loads(out)["run_id"]
    assert code == 0 and client.get_run(run_id).workflow == "report" and client.get_run(run_id).tags == {"schedule": "nightly"}
    assert orjson.loads(cli("schedules", "trigger", "nightly", "--trigger-id", "t1", "--json")[1])["run_id"] == run_id
    code, out, _ = cli("schedules", "resume", "nightly")
    assert code == 0 and out.startswith("nightly: resumed; next run at ")
    assert cli("schedules", "resume", "nightly")[:2] == (EXIT_NO, "nightly: not paused\n")
    assert cli("schedules", "delete", "nightly") == (0, "nightly: deleted (the runs it started stay)\n", "")
    assert cli("schedules", "list") == (0, "(no schedules)\n", "") and client.get_run(run_id) is not None


BAD_VALUES = [
    ["create", "s", "--workflow", "report", "--cron", "every day"],
    ["create", "s", "--workflow", "report", "--cron", "0 2 * * *", "--timezone", "Mars/Olympus_Mons"],
    ["create", "s", "--workflow", "report", "--cron", "0 2 * * *", "--input", "{not json"],
    ["create", "s", "--workflow", "report", "--cron", "0 2 * * *", "--overlap", "queue"],
    ["create", "s", "--workflow", "report", "--cron", "0 2 * * *", "--catchup", "-1h"],
    ["create", "s", "--workflow", "report", "--cron", "0 2 * * *", "--jitter", "soon"],
    ["create", "s", "--workflow", "report"],
    ["create", "s", "--cron", "0 2 * * *"],
    ["update", "nightly"],
    ["update", "nightly", "--cron", "0 25 * * *"],
    ["pause"],
]


@pytest.mark.parametrize("argv", BAD_VALUES, ids=" ".join)
def test_a_bad_value_exits_2_and_writes_nothing(cli, synced, client, r, argv):
    client.schedules.create("nightly", workflow="report", cron="0 2 * * *")
    before = keyspace(r, client.prefix)
    code, _, err = cli("schedules", *argv)
    assert code == EXIT_USAGE and "error: " in err and "Traceback" not in err
    assert keyspace(r, client.prefix) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["create", "nightly", "--workflow", "report", "--cron", "* * * * *"], "a schedule 'nightly' exists already"),
        (["create", "other", "--workflow", "never-synced", "--cron", "* * * * *"], "Unknown workflow: 'never-synced'"),
        (["update", "ghost", "--cron", "0 3 * * *"], "no schedule 'ghost'"),
        (["pause", "ghost"], "no schedule 'ghost'"),
        (["resume", "ghost"], "no schedule 'ghost'"),
        (["trigger", "ghost"], "no schedule 'ghost'"),
        (["delete", "ghost"], "no schedule 'ghost'"),
    ],
)
def test_a_schedule_that_is_not_there_or_is_already_exits_1_and_writes_nothing(cli, synced, client, r, argv, message):
    client.schedules.create("nightly", workflow="report", cron="0 2 * * *")
    before = keyspace(r, client.prefix)
    code, out, err = cli("schedules", *argv)
    assert (code, out) == (EXIT_NO, "") and message in err
    assert keyspace(r, client.prefix) == before
