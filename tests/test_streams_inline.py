"""``ctx.stream`` in the inline test runner (redflow.testing): ``InlineRun.stream``
holds what a worker would have streamed, by the same rules (one
``StreamWriter``): each item with its attempt, earlier attempts' items kept, and
what a run streamed before it parked not streamed again when it resumes."""

import pytest
from helpers import wait_until

from redflow import SerializationError, define_workflow
from redflow.testing.inline import InlineRunner


def streaming(registry):
    @define_workflow("streaming", registry=registry, max_attempts=2)
    def handler(ctx):
        ctx.stream({"hello": ctx.input, "try": ctx.run.attempt})
        ctx.step.sleep("nap", 0.01)
        ctx.stream("after the nap")
        if ctx.run.attempt == 1:
            raise RuntimeError("once more")
        approval = ctx.step.wait_for_event("approval", "approved")
        ctx.stream({"approved by": approval["by"]})
        return "done"

    return handler


def test_an_inline_run_records_its_stream_as_a_worker_writes_it(registry):
    runner = InlineRunner(registry)
    run = runner.run(streaming(registry), "ada")
    assert run.status == "scheduled" and run.parked is not None
    runner.emit_event("approved", {"by": "eve"})
    assert run.result() == "done"
    assert run.stream.values == [
        {"hello": "ada", "try": 1}, "after the nap", {"hello": "ada", "try": 2}, "after the nap", {"approved by": "eve"},
    ]  # fmt: skip
    assert [item.attempt for item in run.stream] == [1, 1, 2, 2, 2]
    assert [item_id for item_id, _ in run.stream] == ["0-1", "0-2", "0-3", "0-4", "0-5"]


def test_inline_and_worker_runs_stream_the_same_items(start, registry, client):
    handler = streaming(registry)
    start()
    handle = client.run("streaming", "ada")
    inline_runner = InlineRunner(registry)
    inline = inline_runner.run(handler, "ada")
    wait_until(lambda: client.get_run(handle.id).parked_for == "event", timeout=10)
    client.emit_event("approved", {"by": "eve"})
    inline_runner.emit_event("approved", {"by": "eve"})
    assert handle.result(10) == inline.result() == "done"
    ours = client.read_stream(handle.id)
    assert [(i.attempt, i.value) for i in ours] == [(i.attempt, i.value) for i in inline.stream]


def test_a_value_that_is_not_json_raises_inline_and_writes_nothing(registry):
    @define_workflow("bad", registry=registry)
    def bad(ctx):
        with pytest.raises(SerializationError, match="stream item is a set"):
            ctx.stream({1})
        ctx.stream("fine")

    run = InlineRunner(registry).run(bad)
    assert run.status == "succeeded" and run.stream.values == ["fine"]
