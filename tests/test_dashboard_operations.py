"""The dashboard's operator controls over real HTTP: tag filters and paging,
tags on runs, bulk retry / cancel and cron pause / resume / trigger, all
escaped and behind the token."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlencode

import pytest
from helpers import charge_and_parked
from test_dashboard import HOSTILE, TOKEN, dashboard, request  # noqa: F401 - dashboard is a fixture


@pytest.fixture
def tagged(registry, client, start):
    charge_and_parked(registry, cron=[{"id": "hourly", "expression": "0 * * * *"}])
    worker = start(queues=["default"])
    failed = [client.run("charge", {"fail": True}, tags={"customer": "42"}) for _ in range(3)]
    for handle in failed:
        with pytest.raises(Exception, match="declined"):
            handle.result(10)
    worker.stop()
    queued = [client.run("parked", {}, tags={"customer": "42", "note": HOSTILE}) for _ in range(2)]
    other = client.run("parked", {}, tags={"customer": "7"})
    return {"failed": [h.id for h in failed], "queued": [h.id for h in queued], "other": other.id}


def run_ids(page: str) -> list[str]:
    return re.findall(r'href="/runs/(run_[0-9a-f-]+)"', page)


def test_the_list_filters_by_tag_pages_with_a_cursor_and_shows_tags_escaped(dashboard, tagged):  # noqa: F811
    port = dashboard()
    status, _, page = request(port, "GET", "/?" + urlencode({"tag": "customer=42", "limit": 2}))
    assert status == 200 and len(run_ids(page)) == 2 and tagged["other"] not in page
    assert HOSTILE not in page and "&lt;script&gt;" in page and 'class="tag"' in page
    (older,) = re.findall(r'<a class="next" href="([^"]+)"', page)
    status, _, page2 = request(port, "GET", unescape(older))
    status3, _, page3 = request(port, "GET", unescape(re.findall(r'<a class="next" href="([^"]+)"', page2)[0]))
    seen = run_ids(page) + run_ids(page2) + run_ids(page3)
    assert status == status3 == 200 and sorted(seen) == sorted(tagged["failed"] + tagged["queued"])
    status, _, page = request(port, "GET", "/?" + urlencode({"tag": "customer=42", "status": "failed"}))
    assert sorted(run_ids(page)) == sorted(tagged["failed"])
    status, _, page = request(port, "GET", f"/runs/{tagged['queued'][0]}")
    assert status == 200 and "customer=<wbr>42" in page and HOSTILE not in page


@pytest.mark.parametrize(
    ("query", "message"),
    [({"tag": "customer"}, "Bad tag filter"), ({"tag": "customer=42", "cursor": "nonsense"}, "not a run listing cursor")],
)
def test_bad_filters_are_a_400_page(dashboard, tagged, query, message):  # noqa: F811
    status, _, page = request(dashboard(), "GET", "/?" + urlencode(query))
    assert status == 400 and message in unescape(page)


def test_bulk_actions_need_the_token_and_a_confirmation_and_say_what_they_did(dashboard, tagged, client):  # noqa: F811
    port = dashboard()
    form = {"tag": "customer=42", "status": "failed", "confirm": "yes"}
    assert request(port, "POST", "/bulk/retry", form=form)[0] == 403
    assert request(port, "POST", "/bulk/retry", form={**form, "token": "wrong-token-0123456"})[0] == 403
    status, _, page = request(port, "POST", "/bulk/retry", form={"tag": "customer=42", "status": "failed", "token": TOKEN})
    assert status == 400 and "Tick the box" in page
    assert request(port, "GET", "/bulk/retry")[0] == 405
    status, _, page = request(port, "POST", "/bulk/retry", form={**form, "token": TOKEN})
    assert status == 200 and "3 run(s) retried (status=failed customer=42)" in page
    assert all(client.get_run(i).status == "queued" for i in tagged["failed"])
    status, _, page = request(port, "POST", "/bulk/cancel", form={"tag": "customer=42", "confirm": "yes", "token": TOKEN, "reason": "r"})
    assert status == 200 and "5 run(s) canceled or told to stop (customer=42)" in page
    assert client.get_run(tagged["other"]).status == "queued" and client.get_run(tagged["queued"][0]).cancel_reason == "r"
    status, _, page = request(port, "POST", "/bulk/cancel", form={"status": "failed", "confirm": "yes", "token": TOKEN})
    assert status == 400 and "cancel --all acts on runs that are scheduled or queued or running" in unescape(page)


def test_the_overview_offers_bulk_buttons_that_fit_the_filter_and_none_without_a_token(dashboard, tagged):  # noqa: F811
    page = request(dashboard(), "GET", "/?status=failed")[2]
    assert 'action="/bulk/retry"' in page and 'action="/bulk/cancel"' not in page
    page = request(dashboard(), "GET", "/?status=succeeded")[2]
    assert "/bulk/" not in page
    page = request(dashboard(token=None), "GET", "/")[2]
    assert "/bulk/" not in page and "/cron/" not in page and "Actions are off" in page


def test_cron_pause_resume_and_trigger_from_the_dashboard(dashboard, tagged, client, r):  # noqa: F811
    port = dashboard()
    (cron_id,) = r.hkeys(client.keys.cron_def())
    page = request(port, "GET", "/")[2]
    assert f'action="/cron/{cron_id}/pause"' in page and f'formaction="/cron/{cron_id}/trigger"' in page
    assert request(port, "POST", f"/cron/{cron_id}/pause")[0] == 403
    status, _, page = request(port, "POST", f"/cron/{cron_id}/pause", form={"token": TOKEN})
    assert status == 200 and f"{cron_id}: paused" in page
    page = request(port, "GET", "/")[2]
    assert f'action="/cron/{cron_id}/resume"' in page and ">paused</span>" in page
    status, _, page = request(port, "POST", f"/cron/{cron_id}/trigger", form={"token": TOKEN})
    (run_id,) = re.findall(r"started run (run_[0-9a-f-]+)", page)
    assert status == 200 and client.get_run(run_id).workflow == "charge"
    status, _, page = request(port, "POST", f"/cron/{cron_id}/resume", form={"token": TOKEN})
    assert status == 200 and "resumed; next fire at" in page and r.zscore(client.keys.cron_next(), cron_id)
    assert request(port, "POST", "/cron/cron_nope/pause", form={"token": TOKEN})[0] == 404
