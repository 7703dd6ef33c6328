"""Singleton and debounce in the inline test runner (redflow.testing), on its virtual clock:
decided as the enqueue script decides them (redflow/testing/inline_keys.py)."""

from __future__ import annotations

import pytest

from redflow import Debounce, RedflowError, Singleton, define_workflow
from redflow.testing import InlineRunner


def test_a_singleton_skips_while_its_run_is_unfinished_and_replace_cancels_it(registry):
    @define_workflow("skip", registry=registry, singleton=Singleton(key=lambda i: i["k"]))
    def skip(ctx):
        ctx.step.sleep("wait", 60)
        return ctx.input["n"]

    @define_workflow("replace", registry=registry, singleton=Singleton(key="one", on_conflict="replace"))
    def replace(ctx):
        ctx.step.sleep("wait", 60)
        return ctx.input

    runner = InlineRunner(registry)
    parked = runner.start(skip, {"k": "a", "n": 1}, delay=5)  # scheduled: unfinished
    assert runner.run(skip, {"k": "a", "n": 2}) is parked and parked.skipped_calls == 1
    assert runner.run(skip, {"k": "b", "n": 3}) is not parked
    runner.advance(5)  # it starts, and its sleep is fast-forwarded: it ends
    assert parked.result() == 1
    assert runner.run(skip, {"k": "a", "n": 4}).result() == 4  # the key was let go

    first = runner.start(replace, 1, delay=5)
    second = runner.start(replace, 2, delay=5)
    assert (first.status, "replaced" in str(first.error), second.status) == ("canceled", True, "scheduled")
    runner.advance(5)
    assert second.result() == 2


def test_debounced_calls_collapse_into_one_run_started_period_after_the_last_within_max_wait(registry):
    @define_workflow("index", registry=registry, debounce=Debounce(period=10, key=lambda i: i["doc"], max_wait=25))
    def index(ctx):
        return ctx.input["v"]

    runner = InlineRunner(registry)
    first = runner.run(index, {"doc": "a", "v": 1})
    assert first.status == "scheduled" and first.due_ms == first.created_ms + 10_000
    runner.advance(8)
    called_ms = runner.now_ms()
    assert runner.run(index, {"doc": "a", "v": 2}) is first  # within the period: collapsed, moved on
    assert called_ms + 10_000 <= first.due_ms <= runner.now_ms() + 10_000  # 10 s after the call (its clock is local time: a ms may pass)
    runner.advance(8)
    assert runner.run(index, {"doc": "a", "v": 3}) is first
    assert first.due_ms == first.created_ms + 25_000  # max_wait after the first call, not 10 s after this one
    assert (first.status, first.collapsed_calls) == ("scheduled", 2)
    runner.advance(9)
    assert first.result() == 3  # the last input
    assert runner.run(index, {"doc": "a", "v": 4}) is not first  # a new window
    with pytest.raises(RedflowError, match="is debounced"):
        runner.start(index, {"doc": "a", "v": 5}, delay=1)
