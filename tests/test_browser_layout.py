"""The dashboard's layout in a real headless Chromium, at 800 and 1,280 px:
nothing sticks out of its card (the cron card's token field and buttons did)
and no table is cut off (the workers table was, at 800 px). The screenshots
are saved; set REDFLOW_LAYOUT_PNG=<dir> to keep them and look at them.
"""

from __future__ import annotations

import os
import shutil

import gevent
import pytest
from helpers import wait_until
from selenium.webdriver.common.by import By
from test_browser import TOKEN, browser, lost_worker  # noqa: F401 - browser is a fixture

from redflow import define_workflow
from redflow.ops.dashboard import serve

WIDTHS = (800, 1280)

#: Each element of ``selector`` as [left, right, top, bottom], and those of the
#: card (``section``) it is in.
BOXES = """
return [...document.querySelectorAll(arguments[0])].map(el => {
  const box = el.getBoundingClientRect(), card = el.closest('section').getBoundingClientRect();
  return {what: el.outerHTML.slice(0, 80), el: [box.left, box.right, box.top, box.bottom],
          card: [card.left, card.right, card.top, card.bottom]};
});
"""
#: Per card: its heading, its content's width and the width it shows (a card scrolls what does not fit).
CARDS = """
return [...document.querySelectorAll('main section')].map(s => ({
  title: (s.querySelector('h2') || {}).textContent, scroll: s.scrollWidth, client: s.clientWidth,
  right: s.getBoundingClientRect().right}));
"""


def outside(box):
    """How far ``box['el']`` reaches past its card's padding edge, in px (0: inside)."""
    (left, right, top, bottom), (c_left, c_right, c_top, c_bottom) = box["el"], box["card"]
    return max(c_left - left, right - c_right, c_top - top, bottom - c_bottom, 0)


@pytest.fixture
def busy_dashboard(start, registry, client, r):
    """A dashboard with actions on, three workers (one lost; one with many queues, one running
    two long runs), cron triggers, and runs with tags and a long error."""

    queues = ["default", "payments", "emails", "exports", "reports", "webhooks"]
    for name, queue, cron in (
        ("send-monthly-invoices-to-every-customer", "default", [{"expression": "0 9 1 * *", "timezone": "Europe/Paris"}]),
        ("rebuild-search-index", "reports", [{"expression": "*/15 * * * *"}]),
        ("nightly-export", "exports", [{"expression": "0 2 * * *", "timezone": "America/Los_Angeles"}]),
    ):
        define_workflow(name, registry=registry, queue=queue, cron=cron)(lambda ctx: None)

    @define_workflow("reconcile-ledger-with-payment-provider", registry=registry, queue="payments", max_attempts=1)
    def reconcile(ctx):
        if ctx.input.get("hold"):
            ctx.step.run("wait-for-settlement", lambda: gevent.sleep(60))
        raise RuntimeError("provider answered 503 Service Unavailable: retry after 120 s (request id 7f3c2a9e-5b1d-4c8e-9f0a)")

    start(concurrency=50, heartbeat_s=0.2, queues=queues)
    start(concurrency=20, heartbeat_s=0.2, queues=["payments", "default"])
    lost_worker(client, r)
    tags = {"customer": "globex-corporation-emea", "region": "eu-west-1"}
    failed = client.run("reconcile-ledger-with-payment-provider", {}, tags=tags)
    held = [client.run("reconcile-ledger-with-payment-provider", {"hold": True}, tags=tags) for _ in range(2)]
    wait_until(lambda: failed.status() == "failed" and all(h.status() == "running" for h in held), timeout=20)
    gevent.sleep(0.5)  # a few beats: the workers' records name the runs in flight
    server = serve(client, "127.0.0.1", 0, token=TOKEN)
    yield f"http://127.0.0.1:{server.server_port}"
    server.stop(timeout=1)
    for handle in held:  # stopped at their step, so the workers stop at once (not after their 10 s grace)
        handle.cancel()


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_sticks_out_of_its_card_and_no_table_is_cut_off(browser, busy_dashboard, tmp_path, width):  # noqa: F811
    browser.set_window_size(width, 1000)
    browser.get(f"{busy_dashboard}/")
    shot = tmp_path / f"dashboard-{width}.png"
    browser.set_window_size(width, min(3000, browser.execute_script("return document.documentElement.scrollHeight") + 140))
    assert browser.save_screenshot(str(shot))
    if os.environ.get("REDFLOW_LAYOUT_PNG"):
        shutil.copyfile(shot, os.path.join(os.environ["REDFLOW_LAYOUT_PNG"], shot.name))

    controls = browser.execute_script(BOXES, "section form.cron input, section form.cron button")
    assert len(controls) == 9  # a token field and two buttons per trigger
    assert [c["what"] for c in controls if outside(c) > 0.5] == []
    cards = browser.execute_script(CARDS)
    assert [c["title"] for c in cards if c["scroll"] > c["client"] + 1] == []  # nothing hidden behind a scroll bar
    page = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert page[0] <= page[1]  # and the page itself does not scroll sideways
    assert all(c["right"] <= page[1] for c in cards)
    workers = browser.find_element(By.XPATH, "//h2[text()='Workers']/..")
    assert "batch-02" in workers.text and "lost" in workers.text  # the last rows' text is there to read


pytestmark = pytest.mark.slow
