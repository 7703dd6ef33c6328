"""The dashboard in a real headless Chromium: charts, workers, the Workflows page, a
run's timeline, the dark theme, and cancelling a run.

Debian's chromium and chromium-driver are installed by scripts/setup-env; a
missing browser fails this test (it never skips). Set
REDFLOW_SCREENSHOTS=docs to refresh the docs' screenshots
(dashboard.png, dashboard-dark.png, workflows.png, run-timeline.png).
"""

import math
import os
import shutil
import tempfile
from collections import Counter

import gevent
import pytest
from helpers import wait_until, write_finished_runs
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from redflow import NonRetryableError, define_workflow
from redflow.core import codec, tally
from redflow.core.models import WorkerRecord
from redflow.engine.heartbeat import write_tallies
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


def screenshot(browser, tmp_path, name, *, full_page=False):
    """Save a PNG (and copy it to $REDFLOW_SCREENSHOTS, if set); full_page grows the window to the page."""
    if full_page:
        browser.set_window_size(1360, min(3000, browser.execute_script("return document.documentElement.scrollHeight") + 120))
    shot = tmp_path / name
    assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("REDFLOW_SCREENSHOTS"):
        shutil.copyfile(shot, os.path.join(os.environ["REDFLOW_SCREENSHOTS"], name))
    browser.set_window_size(1360, 900)


def color_scheme(browser, scheme):
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


ERRORS = {
    "charge-card": codec.dumps({"name": "NonRetryableError", "message": "card declined", "kind": "non_retriable"}),
    "send-invoice": codec.dumps({"name": "SMTPError", "message": "451 4.7.1 try again later", "kind": "error"}),
}


def seed_history(client, r):
    """An hour of history as producers, workers and their beats would have left it:
    finished runs in the status indexes, and per-minute tallies of waits, durations and depths."""
    now = client.now_ms()
    runs, resolution = [], tally.RESOLUTIONS["1h"]
    pipe = client.redis.pipeline(transaction=False)
    for minute, start in enumerate(resolution.starts(now)[:-1]):
        wave = 0.5 + 0.5 * math.sin(minute / 6)
        for i in range(int(12 + 30 * wave)):
            t = start + i * 900
            status = "failed" if i % 17 == 3 else "canceled" if i % 29 == 5 else "succeeded"
            workflow = "charge-card" if i % 3 == 0 else "send-invoice"
            error = ERRORS[workflow] if status == "failed" else None
            runs.append({"workflow": workflow, "status": status, "created": t - 400, "started": t - 300, "finished": t + 40 * (i % 9),
                         "error": error})  # fmt: skip
        depth = {(name, res.start_of(start), queue): int(depth * wave)
                 for name, res in tally.RESOLUTIONS.items() for queue, depth in (("default", 140), ("payments", 35))}  # fmt: skip
        write_tallies(pipe, client.keys, start, minute_tallies(wave), depth)
    pipe.execute()
    write_finished_runs(r, client, runs)


def minute_tallies(wave):
    """A minute's worth of attempt durations and enqueue-to-start waits, slower when ``wave`` is high."""
    counts = Counter()
    for k in range(9):
        counts[tally.histogram_field(tally.DURATION, tally.bin_of(40 * k + 15 * wave * k), "send-invoice")] += 3
    for k in range(6):
        counts[tally.histogram_field(tally.START, tally.bin_of(5 + 400 * wave * k), "send-invoice")] += 2
    return counts


def lost_worker(client, r):
    """The record of a worker killed half a minute ago: shown as lost until it expires."""
    now = client.now_ms()
    record = WorkerRecord(
        id="worker_5d1c0e7a-91b4-4c2e-8f03-2a6b1d9e4c70", host="batch-02", pid=31337, version="0.1.0", queues=("exports",), slots=20,
        busy=3, done=1204, failed=7, started_at=(now - 7_200_000) / 1000, seen_at=(now - 30_000) / 1000, beat_s=2.0, stopping=False,
        running=(),
    )  # fmt: skip
    r.set(client.keys.worker(record.id), record.to_json(), px=60_000)
    r.zadd(client.keys.workers(), {record.id: now - 30_000})


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_in_a_browser_the_dashboard_shows_charts_workers_workflows_and_a_timeline_and_cancels_a_run(
    browser, start, registry, client, r, tmp_path
):
    @define_workflow("send-invoice", registry=registry, cron=[{"expression": "0 9 * * 1-5", "timezone": "Europe/Paris"}])
    def send_invoice(ctx):
        pdf = ctx.step.run("render-pdf", lambda: gevent.sleep(0.03) or {"pages": 2, "customer": ctx.input["customer"]})
        return ctx.step.run("email", lambda: gevent.sleep(0.01) or {"sent_to": pdf["customer"]})

    @define_workflow("charge-card", registry=registry, queue="payments", max_attempts=3)
    def charge_card(ctx):
        ctx.step.run("authorize", lambda: gevent.sleep(0.02) or {"auth": "A-1"})
        if ctx.input.get("declined"):
            ctx.step.run("capture", lambda: (_ for _ in ()).throw(NonRetryableError("card declined")))
        if ctx.run.attempt == 1:
            ctx.step.run("capture", lambda: (_ for _ in ()).throw(RuntimeError("gateway timeout")))
        ctx.step.run("capture", lambda: gevent.sleep(0.04) or {"captured": ctx.input["amount"]})
        return ctx.step.run_workflow("receipt", "send-invoice", {"customer": "acme"})

    @define_workflow("nightly-export", registry=registry, queue="exports")
    def nightly_export(ctx):
        ctx.step.run("dump", lambda: gevent.sleep(60))

    seed_history(client, r)
    start(concurrency=10, heartbeat_s=0.2, queues=["default", "payments"])
    start(concurrency=4, heartbeat_s=0.2, queues=["exports"])
    lost_worker(client, r)
    for customer in ("acme", "globex", "initech"):
        client.run("send-invoice", {"customer": customer}).result(10)
    charged = client.run("charge-card", {"amount": 4200})
    assert charged.result(20) == {"sent_to": "acme"}
    declined = client.run("charge-card", {"amount": 9, "declined": True})
    wait_until(lambda: declined.status() == "failed", timeout=10)
    client.run("send-invoice", {"customer": "umbrella"}, delay=3600)
    export = client.run("nightly-export", {"day": "2026-11-01"})
    wait_until(lambda: export.status() == "running", timeout=10)
    gevent.sleep(0.6)  # a few beats: the records name the export in flight

    server = serve(client, "127.0.0.1", 0, token=TOKEN)
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        browser.get(f"{base}/")
        charts = browser.find_elements(By.CSS_SELECTOR, ".charts svg.chart")
        assert len(charts) == 4 and all(c.size["width"] > 300 and c.size["height"] > 100 for c in charts)
        assert len(browser.find_elements(By.CSS_SELECTOR, ".charts svg.bars rect.bar")) > 50
        assert browser.find_elements(By.CSS_SELECTOR, ".charts svg.lines polyline.line")
        workers = browser.find_element(By.XPATH, "//h2[text()='Workers']/..").text
        assert str(os.getpid()) in workers and "batch-02" in workers and "lost" in workers and "alive" in workers
        running = browser.find_element(By.XPATH, f"//h2[text()='Workers']/..//a[@title='{export.id}']")
        assert running.text == export.id[:12] + "…"  # what the exports worker runs, by its first 8 hex digits
        row = browser.find_element(By.XPATH, f"//h2[text()='Runs']/..//a[@title='{export.id}']/ancestor::tr")
        assert "nightly-export" in row.text and "running" in row.text
        assert "send-invoice" in browser.find_element(By.XPATH, "//h2[text()='Cron triggers']/..").text
        screenshot(browser, tmp_path, "dashboard.png")
        color_scheme(browser, "dark")
        browser.refresh()
        assert browser.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(18, 21, 28)"
        screenshot(browser, tmp_path, "dashboard-dark.png")
        color_scheme(browser, "light")

        browser.find_element(By.LINK_TEXT, "workflows").click()
        wait_until(lambda: "/workflows" in browser.current_url, timeout=30)
        row = browser.find_element(By.LINK_TEXT, "charge-card").find_element(By.XPATH, "./ancestor::tr")
        assert "card declined" in row.text and "%" in row.text
        screenshot(browser, tmp_path, "workflows.png")

        browser.get(f"{base}/runs/{charged.id}")
        timeline = browser.find_element(By.CSS_SELECTOR, ".timeline-box svg.timeline")
        assert timeline.size["width"] > 600 and browser.find_elements(By.CSS_SELECTOR, ".timeline-box rect.replayed")
        assert "Children (1)" in browser.find_element(By.TAG_NAME, "main").text
        screenshot(browser, tmp_path, "run-timeline.png", full_page=True)

        browser.get(f"{base}/")
        browser.find_element(By.XPATH, f"//h2[text()='Runs']/..//a[@title='{export.id}']").click()
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
