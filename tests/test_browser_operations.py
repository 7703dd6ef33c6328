"""The dashboard's operator controls in a real headless Chromium: filter by tag,
page back, cancel every matching run with the bulk button, pause and trigger
a cron. Set REDFLOW_DASHBOARD_OPS_PNG=docs/dashboard-operations.png to
refresh the docs' screenshot."""

from __future__ import annotations

import os
import shutil

import pytest
from helpers import wait_until
from selenium.webdriver.common.by import By
from test_browser import TOKEN, browser  # noqa: F401 - browser is a fixture

from redflow import NonRetryableError, define_workflow
from redflow.ops.dashboard import serve


def test_in_a_browser_an_operator_filters_by_tag_pages_bulk_cancels_and_pauses_a_cron(browser, start, registry, client, r, tmp_path):  # noqa: F811
    @define_workflow("sync-invoices", registry=registry, max_attempts=1, cron=[{"id": "nightly", "expression": "0 2 * * *"}])
    def sync_invoices(ctx):
        if ctx.input["fail"]:
            raise NonRetryableError("ledger API returned 503")
        return {"synced": ctx.input["n"]}

    @define_workflow("send-reminder", registry=registry, queue="mail")
    def send_reminder(ctx):
        return None

    worker = start(queues=["default"])
    for n in range(6):
        handle = client.run("sync-invoices", {"n": n, "fail": n % 2 == 0}, tags={"customer": "acme" if n < 4 else "globex", "region": "eu"})
        wait_until(lambda h=handle: h.status() in ("succeeded", "failed"), timeout=10)
    worker.stop()
    reminders = [client.run("send-reminder", {"n": n}, tags={"customer": "acme", "region": "eu"}) for n in range(3)]
    other = client.run("send-reminder", {"n": 9}, tags={"customer": "globex"})
    (cron_id,) = r.hkeys(client.keys.cron_def())

    server = serve(client, "127.0.0.1", 0, token=TOKEN)
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        browser.get(f"{base}/?limit=4")
        form = browser.find_element(By.CSS_SELECTOR, "form.filters")
        form.find_element(By.NAME, "tag").send_keys("customer=acme")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: "customer%3Dacme" in browser.current_url, timeout=30)
        rows = browser.find_elements(By.CSS_SELECTOR, "main table tbody tr")
        listed = [row for row in rows if "run_" in row.text]
        assert len(listed) == 4 and all("customer=acme" in row.text for row in listed)
        browser.set_window_size(1360, 1000)
        cron_card = browser.find_element(By.XPATH, "//h2[text()='Cron triggers']/..")
        browser.execute_script("arguments[0].scrollIntoView()", cron_card)  # the controls, not the charts above them
        shot = tmp_path / "operations.png"
        assert browser.save_screenshot(str(shot))
        if os.environ.get("REDFLOW_DASHBOARD_OPS_PNG"):
            shutil.copyfile(shot, os.environ["REDFLOW_DASHBOARD_OPS_PNG"])

        browser.find_element(By.CSS_SELECTOR, "a.next").click()
        wait_until(lambda: "cursor=" in browser.current_url, timeout=30)
        assert len([row for row in browser.find_elements(By.CSS_SELECTOR, "main table tbody tr") if "run_" in row.text]) == 3

        browser.get(f"{base}/?status=queued&tag=customer%3Dacme")
        bulk = browser.find_element(By.CSS_SELECTOR, "form[action='/bulk/cancel']")
        bulk.find_element(By.NAME, "token").send_keys(TOKEN)
        bulk.find_element(By.NAME, "reason").send_keys("customer left")
        bulk.find_element(By.NAME, "confirm").click()
        bulk.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: "bulk/cancel" in browser.current_url, timeout=30)
        assert "3 run(s) canceled or told to stop (status=queued customer=acme)" in browser.find_element(By.TAG_NAME, "main").text
        assert all(client.get_run(h.id).status == "canceled" for h in reminders) and other.status() == "queued"

        browser.get(f"{base}/")
        pause = browser.find_element(By.CSS_SELECTOR, f"form[action='/cron/{cron_id}/pause']")
        pause.find_element(By.NAME, "token").send_keys(TOKEN)
        pause.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: "/pause" in browser.current_url, timeout=30)
        assert f"{cron_id}: paused" in browser.find_element(By.TAG_NAME, "main").text
        browser.get(f"{base}/")
        assert browser.find_elements(By.CSS_SELECTOR, f"form[action='/cron/{cron_id}/resume']")
        assert r.hexists(client.keys.cron_paused(), cron_id)

        cron_form = browser.find_element(By.CSS_SELECTOR, f"form[action='/cron/{cron_id}/resume']")
        cron_form.find_element(By.NAME, "token").send_keys(TOKEN)
        cron_form.find_element(By.CSS_SELECTOR, f"button[formaction='/cron/{cron_id}/trigger']").click()
        wait_until(lambda: "/trigger" in browser.current_url, timeout=30)
        assert "started run run_" in browser.find_element(By.TAG_NAME, "main").text
    finally:
        server.stop(timeout=1)


pytestmark = pytest.mark.slow
