"""`runs list --tag`, `runs retry|cancel --all` and `cron pause|resume|trigger`
on the command line: filters, dry runs, confirmation, clear errors."""

from __future__ import annotations

import io

import orjson
import pytest
from helpers import charge_and_parked

from redflow import define_workflow


@pytest.fixture
def tagged(registry, client, start):
    """Three failed runs (two for customer 42), two queued runs for customer 42, one succeeded run."""

    charge_and_parked(registry)
    worker = start(queues=["default"])
    failed = [client.run("charge", {"fail": True}, tags={"customer": c}) for c in ("42", "42", "7")]
    ok = client.run("charge", {}, tags={"customer": "42"})
    assert ok.result(10) == "ok"
    for handle in failed:
        with pytest.raises(Exception, match="declined"):
            handle.result(10)
    worker.stop()
    queued = [client.run("parked", {}, tags={"customer": "42", "tenant": "acme"}) for _ in range(2)]
    return {"failed": [h.id for h in failed], "ok": ok.id, "queued": [h.id for h in queued]}


def test_runs_list_filters_by_tag_and_pages_with_a_cursor(cli, tagged):  # noqa: F811
    code, out, err = cli("runs", "list", "--tag", "customer=42", "--limit", "2")
    assert code == 0 and len(out.splitlines()) == 3 and err.startswith("(more may match: --cursor ")
    cursor = err.split("--cursor ")[1].strip().rstrip(")")
    code, out, err = cli("runs", "list", "--tag", "customer=42", "--limit", "2", "--cursor", cursor, "--json")
    page = orjson.loads(out)
    assert code == 0 and len(page["runs"]) == 2 and all(run["tags"]["customer"] == "42" for run in page["runs"])
    assert page["cursor"] and err == ""  # in the JSON, where a script reads it
    code, out, _ = cli("runs", "list", "--tag", "customer=42", "--limit", "2", "--cursor", page["cursor"], "--json")
    last = orjson.loads(out)
    assert len(last["runs"]) == 1 and last["cursor"] is None
    listed = [run["id"] for run in orjson.loads(cli("runs", "list", "--tag", "customer=42", "--json")[1])["runs"]]
    assert listed[2:] == [run["id"] for run in page["runs"] + last["runs"]]  # the pages walk the one listing
    code, out, _ = cli("runs", "list", "--tag", "customer=42", "--tag", "tenant=acme", "--status", "queued", "--json")
    assert {run["id"] for run in orjson.loads(out)["runs"]} == set(tagged["queued"])
    code, out, _ = cli("runs", "show", tagged["queued"][0])
    assert code == 0 and "tags      customer=42 tenant=acme" in out
    code, _, err = cli("runs", "list", "--tag", "customer")
    assert code == 2 and "argument --tag: a tag filter is key=value" in err
    code, _, err = cli("runs", "list", "--tag", "customer=1", "--tag", "customer=2")
    assert code == 2 and "given twice" in err


def test_runs_retry_all_counts_with_dry_run_and_acts_with_yes(cli, tagged, client):  # noqa: F811
    code, out, _ = cli("runs", "retry", "--all", "--tag", "customer=42", "--dry-run")
    assert (code, out) == (0, "2 run(s) would be retried (customer=42)\n")
    assert all(client.get_run(run_id).status == "failed" for run_id in tagged["failed"])
    code, out, _ = cli("runs", "retry", "--all", "--tag", "customer=42", "--yes", "--json")
    assert code == 0 and orjson.loads(out) == {"action": "retry", "count": 2}
    assert [client.get_run(run_id).status for run_id in tagged["failed"]] == ["queued", "queued", "failed"]


def test_runs_cancel_all_asks_first_and_refuses_without_a_terminal(cli, tagged, client, monkeypatch):  # noqa: F811
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = cli("runs", "cancel", "--all", "--tag", "customer=42")
    assert code == 2 and "add --yes to confirm" in err  # it cannot ask: a command line to change
    monkeypatch.setattr("sys.stdin", _Tty("n\n"))
    code, _, err = cli("runs", "cancel", "--all", "--tag", "customer=42")
    assert code == 1 and "nothing done" in err and all(client.get_run(i).status == "queued" for i in tagged["queued"])
    monkeypatch.setattr("sys.stdin", _Tty("y\n"))
    code, out, _ = cli("runs", "cancel", "--all", "--tag", "customer=42", "--reason", "incident")
    assert (code, out) == (0, "2 run(s) canceled or told to stop (customer=42)\n")
    assert all(client.get_run(i).status == "canceled" for i in tagged["queued"]) and client.get_run(tagged["ok"]).status == "succeeded"


def test_bulk_command_lines_that_make_no_sense_are_refused_with_exit_2(cli, tagged, client):  # noqa: F811
    assert cli("runs", "retry")[0] == 2
    code, _, err = cli("runs", "retry", tagged["ok"], "--all")
    assert code == 2 and "not both" in err
    code, _, err = cli("runs", "retry", "--all", "--status", "succeeded", "--dry-run")
    assert code == 2 and "argument --status: invalid choice: 'succeeded' (choose from 'failed', 'canceled')" in err
    code, _, err = cli("runs", "cancel", tagged["queued"][0], "--tag", "customer=42")
    assert code == 2 and "go with --all" in err
    assert [client.get_run(run_id).status for run_id in tagged["failed"]] == ["failed"] * 3  # nothing was done


def test_cron_pause_resume_and_trigger_on_the_command_line(cli, registry, client, r):  # noqa: F811
    @define_workflow("nightly", registry=registry, cron=[{"expression": "0 3 * * *", "input": {"full": True}}])
    def nightly(ctx):
        return None

    client.sync_registry(registry)
    (cron_id,) = r.hkeys(client.keys.cron_def())
    assert cli("cron", "pause", cron_id) == (0, f"{cron_id}: paused\n", "")
    code, out, _ = cli("cron", "list")
    assert code == 0 and "paused" in out.splitlines()[1]
    assert cli("cron", "pause", cron_id)[:2] == (1, f"{cron_id}: already paused\n")
    code, out, _ = cli("cron", "trigger", cron_id, "--trigger-id", "t1", "--json")
    run_id = orjson.loads(out)["run_id"]
    assert code == 0 and client.get_run(run_id).input == {"full": True}
    code, out, _ = cli("cron", "resume", cron_id)
    assert code == 0 and out.startswith(f"{cron_id}: resumed; next fire at")
    code, _, err = cli("cron", "pause", "cron_nope")
    assert code == 1 and "no cron trigger 'cron_nope'" in err


def test_cron_commands_take_a_workflow_name_when_it_has_one_cron_trigger(cli, registry, client, r):  # noqa: F811
    @define_workflow("nightly", registry=registry, cron=[{"expression": "0 3 * * *"}])
    def nightly(ctx):
        return None

    @define_workflow("twice", registry=registry, cron=[{"expression": "0 4 * * *"}, {"id": "evening", "expression": "0 20 * * *"}])
    def twice(ctx):
        return None

    client.sync_registry(registry)
    (nightly_id,) = [i for i in r.hkeys(client.keys.cron_def()) if "nightly" in r.hget(client.keys.cron_def(), i)]
    assert cli("cron", "pause", "nightly") == (0, f"{nightly_id}: paused\n", "")
    assert r.hexists(client.keys.cron_paused(), nightly_id)
    code, out, _ = cli("cron", "trigger", "nightly", "--json")
    assert code == 0 and client.get_run(orjson.loads(out)["run_id"]).workflow == "nightly"
    assert cli("cron", "resume", "nightly")[0] == 0 and not r.hexists(client.keys.cron_paused(), nightly_id)

    code, _, err = cli("cron", "pause", "twice")  # which one? it names both, and nothing changes
    assert code == 1 and "workflow 'twice' has 2 cron triggers: " in err and "(0 4 * * *)" in err and "(0 20 * * *)" in err
    assert r.hlen(client.keys.cron_paused()) == 0
    evening = next(i for i in r.hkeys(client.keys.cron_def()) if "0 20" in r.hget(client.keys.cron_def(), i))
    assert cli("cron", "pause", evening)[:2] == (0, f"{evening}: paused\n")  # an id still works, whatever the workflow
    code, _, err = cli("cron", "pause", "no-such-workflow")
    assert code == 1 and "no cron trigger 'no-such-workflow': no such cron id, nor a workflow with a cron trigger" in err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True
