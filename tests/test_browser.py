"""The dashboard in a real headless Chromium: load the page, see a run, cancel it.

Debian's chromium and chromium-driver are installed by scripts/setup-env; a
missing browser fails this test (it never skips). Set
REDFLOW_DASHBOARD_PNG=docs/dashboard.png to refresh the README screenshot.
"""

import os
import shutil
import tempfile

import gevent
import pytest
from helpers import wait_until
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from redflow import NonRetryableError, define_workflow
from redflow.ops.dashboard import NOTICES, serve

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOKEN = "browser-test-token-0123"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", "--window-size=1360,900")  # fmt: skip


@pytest.fixture
def browser():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run scripts/setup-env (it installs Debian's chromium and chromium-driver)")
    profile = tempfile.mkdtemp(prefix="redflow-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def test_in_a_browser_the_dashboard_lists_a_running_run_and_cancels_it(browser, start, registry, client, tmp_path):
    @define_workflow("send-invoice", registry=registry, cron=[{"expression": "0 9 * * 1-5", "timezone": "Europe/Paris"}])
    def send_invoice(ctx):
        pdf = ctx.step.run("render-pdf", lambda: {"pages": 2, "customer": ctx.input["customer"]})
        return ctx.step.run("email", lambda: {"sent_to": pdf["customer"]})

    @define_workflow("charge-card", registry=registry, queue="payments", max_attempts=1)
    def charge_card(ctx):
        ctx.step.run("authorize", lambda: (_ for _ in ()).throw(NonRetryableError("card declined")))

    @define_workflow("nightly-export", registry=registry, queue="exports")
    def nightly_export(ctx):
        ctx.step.run("dump", lambda: gevent.sleep(60))

    start()
    for customer in ("acme", "globex", "initech"):
        client.run("send-invoice", {"customer": customer}).result(10)
    declined = client.run("charge-card", {"amount": 4200})
    wait_until(lambda: declined.status() == "failed", timeout=10)
    client.run("send-invoice", {"customer": "umbrella"}, delay=3600)
    export = client.run("nightly-export", {"day": "2026-11-01"})
    wait_until(lambda: export.status() == "running", timeout=10)

    server = serve(client, "127.0.0.1", 0, token=TOKEN)
    try:
        browser.get(f"http://127.0.0.1:{server.server_port}/")
        link = browser.find_element(By.LINK_TEXT, export.id)
        row = link.find_element(By.XPATH, "./ancestor::tr")
        assert "nightly-export" in row.text and "running" in row.text
        assert "send-invoice" in browser.find_element(By.XPATH, "//h2[text()='Cron triggers']/..").text
        shot = tmp_path / "dashboard.png"
        assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("REDFLOW_DASHBOARD_PNG"):
            shutil.copyfile(shot, os.environ["REDFLOW_DASHBOARD_PNG"])

        link.click()
        wait_until(lambda: export.id in browser.find_element(By.TAG_NAME, "h1").text, timeout=30)
        form = browser.find_element(By.CSS_SELECTOR, f"form[action='/runs/{export.id}/cancel']")
        form.find_element(By.NAME, "token").send_keys(TOKEN)
        form.find_element(By.NAME, "reason").send_keys("clicked in a browser")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: "notice" in browser.current_url, timeout=30, message="the redirect after cancel")
        assert browser.find_element(By.CLASS_NAME, "notice").text in (NOTICES["cancel-requested"], NOTICES["canceled"])

        wait_until(lambda: export.status() == "canceled", timeout=15)
        browser.refresh()
        assert browser.find_element(By.CSS_SELECTOR, "h1 .badge").text == "canceled"
        assert client.get_run(export.id).cancel_reason == "clicked in a browser"
    finally:
        server.stop(timeout=1)
