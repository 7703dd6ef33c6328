"""The schedules page in a real headless Chromium: reached from the nav, every
schedule with its next run, nothing sticking out of its card at 800 and
1,280 px, and an operator pausing, resuming and triggering one with the token.
Set REDFLOW_SCREENSHOTS=<dir> to keep the screenshot."""

from __future__ import annotations

import pytest
from helpers import wait_until
from selenium.webdriver.common.by import By
from test_browser import TOKEN, browser, screenshot  # noqa: F401 - browser is a fixture
from test_browser_layout import BOXES, CARDS, outside

from redflow import define_workflow
from redflow.ops.dashboard import serve
from redflow.ops.format import fmt_time

pytestmark = pytest.mark.slow
#: The row of schedule search-index (its first cell; another row's workflow is rebuild-search-index).
ROW = "//tr[td[1][normalize-space()='search-index']]"


@pytest.fixture
def schedules_dashboard(registry, client):
    @define_workflow("send-monthly-invoices-to-every-customer", registry=registry)
    def invoices(ctx):
        return None

    @define_workflow("rebuild-search-index", registry=registry)
    def rebuild(ctx):
        return None

    client.schedules.create("monthly-invoices-for-every-customer-in-europe", workflow="send-monthly-invoices-to-every-customer",
                            cron="0 9 1 * *", timezone="Europe/Paris", catchup=3600, jitter=300, input={"region": "eu"})  # fmt: skip
    client.schedules.create("search-index", workflow="rebuild-search-index", cron="*/15 * * * *", overlap="cancel_running")
    client.schedules.create("nightly-export", workflow="rebuild-search-index", cron="0 2 * * *", timezone="America/Los_Angeles")
    client.schedules.pause("nightly-export")
    server = serve(client, "127.0.0.1", 0, token=TOKEN)
    yield f"http://127.0.0.1:{server.server_port}"
    server.stop(timeout=1)


@pytest.mark.parametrize("width", (800, 1280))
def test_the_schedules_page_fits_its_card_at_both_widths(browser, schedules_dashboard, client, tmp_path, width):  # noqa: F811
    browser.set_window_size(width, 1000)
    browser.get(f"{schedules_dashboard}/")
    browser.find_element(By.LINK_TEXT, "schedules").click()
    wait_until(lambda: browser.current_url.endswith("/schedules"), timeout=30)
    main = browser.find_element(By.TAG_NAME, "main").text
    search_index = client.schedules.get("search-index")
    assert "Schedules (3)" in main and "*/15 * * * *" in main and "cancel_running" in main and "paused" in main
    assert fmt_time(search_index.next_run_at).split(" ")[1] in main  # its next run, as the table shows times
    controls = browser.execute_script(BOXES, "section form.schedule input:not([type=hidden]), section form.schedule button")
    assert len(controls) == 9  # a token field and two buttons per schedule
    assert [c["what"] for c in controls if outside(c) > 0.5] == []
    assert [c["title"] for c in browser.execute_script(CARDS) if c["scroll"] > c["client"] + 1] == []
    page = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert page[0] <= page[1]
    screenshot(browser, tmp_path, f"schedules-{width}.png", full_page=True)


def test_in_a_browser_an_operator_pauses_resumes_and_triggers_a_schedule(browser, schedules_dashboard, client):  # noqa: F811
    browser.get(f"{schedules_dashboard}/schedules")
    row = browser.find_element(By.XPATH, ROW)
    row.find_element(By.NAME, "token").send_keys(TOKEN)
    row.find_element(By.XPATH, ".//button[text()='pause']").click()
    wait_until(lambda: browser.current_url.endswith("/schedules/pause"), timeout=30)
    assert "search-index: paused" in browser.find_element(By.TAG_NAME, "main").text and client.schedules.get("search-index").paused

    browser.get(f"{schedules_dashboard}/schedules")
    row = browser.find_element(By.XPATH, ROW)
    row.find_element(By.NAME, "token").send_keys(TOKEN)
    row.find_element(By.XPATH, ".//button[text()='trigger']").click()
    wait_until(lambda: browser.current_url.endswith("/schedules/trigger"), timeout=30)
    (run,) = client.list_runs(tags={"schedule": "search-index"})
    assert f"search-index: started run {run.id}" in browser.find_element(By.TAG_NAME, "main").text

    browser.get(f"{schedules_dashboard}/schedules")
    row = browser.find_element(By.XPATH, ROW)
    assert run.id[:12] in row.text  # its last run
    row.find_element(By.NAME, "token").send_keys(TOKEN)
    row.find_element(By.XPATH, ".//button[text()='resume']").click()
    wait_until(lambda: browser.current_url.endswith("/schedules/resume"), timeout=30)
    assert "search-index: resumed; next run at" in browser.find_element(By.TAG_NAME, "main").text
    assert not client.schedules.get("search-index").paused
