"""``client.get_handle`` and ``client.run_many(tags=)`` (issue 33 item 12)."""

from __future__ import annotations

import pytest

from redflow import InputValidationError, RunNotFoundError, define_workflow


def test_get_handle_gives_a_working_handle_for_a_stored_run_and_refuses_an_unknown_id(start, registry, client):
    @define_workflow("double", registry=registry)
    def double(ctx):
        return ctx.input * 2

    started = client.run("double", 21)
    handle = client.get_handle(started.id)
    assert handle == started and handle.id == started.id
    start()
    assert handle.result(10) == 42 and handle.status() == "succeeded" and handle.cancel() is False
    later = client.get_handle(client.run("double", 1, delay=3600).id)
    assert later.cancel() is True and later.status() == "canceled"
    for bad in ("run_missing", "", None):
        with pytest.raises(RunNotFoundError, match="Run not found"):
            client.get_handle(bad)
    assert client.purge(older_than=0) == 2
    with pytest.raises(RunNotFoundError):  # a handle whose run was deleted since
        handle.status()


def test_run_many_files_every_run_under_the_tags_and_refuses_bad_tags_before_sending_any(registry, client):
    @define_workflow("tagged", registry=registry)
    def tagged(ctx):
        return ctx.input

    handles = client.run_many("tagged", range(3), tags={"customer": "42"})
    assert {h.id for h in client.list_runs(tags={"customer": "42"})} == {h.id for h in handles}
    assert all(client.get_run(h.id).tags == {"customer": "42"} for h in handles)
    with pytest.raises(InputValidationError, match="tag"):
        client.run_many("tagged", range(3), tags={"customer": ""})
    assert client.count_runs("queued") == 3
