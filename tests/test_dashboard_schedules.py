"""The dashboard's schedules page over real HTTP: every schedule with its next
run, ids escaped, and pause / resume / trigger behind the token like the cron
buttons (403 without it, 405 for a GET, 404 for an unknown schedule)."""

from __future__ import annotations

import re
from html import unescape

import pytest
from test_dashboard import HOSTILE, TOKEN, dashboard, request  # noqa: F401 - dashboard is a fixture

from redflow import define_workflow
from redflow.ops.format import fmt_time


@pytest.fixture
def scheduled(registry, client):
    @define_workflow("report", registry=registry)
    def report(ctx):
        return ctx.input

    client.schedules.create("nightly", workflow="report", cron="0 2 * * *", timezone="Europe/Berlin", jitter=30, input={"k": 1})
    client.schedules.create(HOSTILE, workflow="report", cron="*/5 * * * *", overlap="cancel_running")
    client.schedules.pause(HOSTILE)
    return client.schedules.get("nightly")


def test_the_page_lists_each_schedule_with_its_next_run_escaped(dashboard, scheduled, client):  # noqa: F811
    port = dashboard()
    status, _, page = request(port, "GET", "/schedules")
    assert status == 200 and "<h2>Schedules (2)</h2>" in page and 'aria-current="page">schedules</a>' in page
    date, time = fmt_time(scheduled.next_run_at).split(" ")
    assert f'<span class="nowrap">{date}</span> <span class="nowrap">{time}</span>' in page
    assert "<code>0 2 * * *</code>" in page and "Europe/Berlin" in page and "jitter 30s</span>" in page
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and ">paused</span>" in page
    assert 'href="/?tag=schedule%3Dnightly"' in page  # the runs it started


def test_pause_resume_and_trigger_from_the_page_need_the_token(dashboard, scheduled, client):  # noqa: F811
    port = dashboard()
    page = request(port, "GET", "/schedules")[2]
    assert 'action="/schedules/pause"' in page and 'formaction="/schedules/trigger"' in page and 'action="/schedules/resume"' in page
    assert request(port, "POST", "/schedules/pause", form={"schedule": "nightly"})[0] == 403
    assert request(port, "POST", "/schedules/pause", form={"schedule": "nightly", "token": "wrong-token-123"})[0] == 403
    assert request(port, "GET", "/schedules/pause")[0] == 405
    assert not client.schedules.get("nightly").paused

    status, _, page = request(port, "POST", "/schedules/pause", form={"schedule": "nightly", "token": TOKEN})
    assert status == 200 and "nightly: paused" in page and client.schedules.get("nightly").paused
    status, _, page = request(port, "POST", "/schedules/pause", form={"schedule": "nightly", "token": TOKEN})
    assert status == 200 and "nightly: already paused" in page
    status, _, page = request(port, "POST", "/schedules/trigger", form={"schedule": "nightly", "token": TOKEN})
    (run_id,) = re.findall(r"started run (run_[0-9a-f-]+)", page)
    assert status == 200 and client.get_run(run_id).input == {"k": 1} and client.schedules.get("nightly").last_run_id == run_id
    status, _, page = request(port, "POST", "/schedules/resume", form={"schedule": "nightly", "token": TOKEN})
    assert status == 200 and "nightly: resumed; next run at" in page and not client.schedules.get("nightly").paused
    status, _, page = request(port, "POST", "/schedules/resume", form={"schedule": HOSTILE, "token": TOKEN})
    assert status == 200 and HOSTILE not in page and unescape("&lt;script&gt;") in unescape(page)
    page = request(port, "GET", "/schedules")[2]
    assert f'href="/runs/{run_id}"' in page


@pytest.mark.parametrize(
    ("form", "status"),
    [({"schedule": "ghost"}, 404), ({}, 400), ({"schedule": "x" * 201}, 400)],
    ids=["unknown", "none", "too long"],
)
def test_a_bad_schedule_in_the_form_is_refused_and_changes_nothing(dashboard, scheduled, client, form, status):  # noqa: F811
    port = dashboard()
    before = client.schedules.list()
    assert request(port, "POST", "/schedules/trigger", form={**form, "token": TOKEN})[0] == status
    assert client.schedules.list() == before and client.list_runs() == []


def test_without_a_token_the_page_shows_no_buttons(dashboard, scheduled):  # noqa: F811
    port = dashboard(token=None)
    status, _, page = request(port, "GET", "/schedules")
    assert status == 200 and "/schedules/pause" not in page and "Actions are off" in page
    assert request(port, "POST", "/schedules/pause", form={"schedule": "nightly", "token": TOKEN})[0] == 403


def test_no_schedules_says_how_to_make_one(dashboard):  # noqa: F811
    status, _, page = request(dashboard(), "GET", "/schedules")
    assert status == 200 and "No schedules: create one with client.schedules.create" in page
