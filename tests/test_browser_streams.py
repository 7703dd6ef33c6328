"""A run's output stream, live on its page, in a real headless Chromium: the page
is served with the items written so far, the browser's EventSource appends each
new item as the run writes it (as text: a hostile value stays text), and says
the run ended when it does. Set REDFLOW_SCREENSHOTS=docs to refresh the docs'
screenshot (run-stream.png)."""

from __future__ import annotations

import pytest
from gevent.event import Event
from helpers import wait_until
from selenium.webdriver.common.by import By
from test_browser import TOKEN, browser, screenshot  # noqa: F401 - browser is a fixture

from redflow import define_workflow
from redflow.ops.dashboard import serve

HOSTILE = "<img src=x onerror=alert(1)>"

pytestmark = pytest.mark.slow  # a browser starts: several seconds


def test_in_a_browser_the_run_page_shows_the_stream_live_until_the_run_ends(browser, start, registry, client, tmp_path):  # noqa: F811
    step = Event()

    @define_workflow("draft-reply", registry=registry)
    def draft_reply(ctx):
        ctx.stream({"token": "Dear"})
        for token in ("Ada,", "thanks", "for", HOSTILE):
            step.wait(60)
            step.clear()
            ctx.stream({"token": token})
        step.wait(60)
        return {"words": 5}

    start()
    handle = client.run("draft-reply", {"to": "ada"})
    wait_until(lambda: len(client.read_stream(handle.id)) == 1, timeout=10)
    server = serve(client, "127.0.0.1", 0, token=TOKEN)
    try:
        browser.get(f"http://127.0.0.1:{server.server_port}/runs/{handle.id}")

        def shown():
            return [row.find_element(By.TAG_NAME, "code").text for row in browser.find_elements(By.CSS_SELECTOR, "#stream-items li")]

        assert shown() == ['{"token":"Dear"}']  # served with the page
        for count in range(2, 6):
            step.set()
            wait_until(lambda count=count: len(shown()) == count, timeout=30, message=f"{count} items on the page")
            if count == 4:
                screenshot(browser, tmp_path, "run-stream.png", full_page=True)
        assert shown() == ['{"token":"Dear"}', '{"token":"Ada,"}', '{"token":"thanks"}', '{"token":"for"}', f'{{"token":"{HOSTILE}"}}']
        assert browser.find_elements(By.CSS_SELECTOR, "#stream-items img") == []  # text, not HTML
        assert browser.find_element(By.ID, "stream-state").text.startswith("Live: 5 item(s)")
        step.set()
        state = browser.find_element(By.ID, "stream-state")
        wait_until(lambda: state.text == "The run ended: succeeded.", timeout=30, message="the end on the page")
        assert handle.result(5) == {"words": 5} and len(shown()) == 5
    finally:
        server.stop(timeout=1)
