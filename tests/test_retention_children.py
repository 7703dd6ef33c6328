"""Retention and the children of ``run_workflows``: no record a live run still
needs is deleted. A child is kept (by the cleaner, ``purge`` and its
workflow's ``max_finished``) while its parent is unfinished, whatever its own
retention; once the parent has ended (or is gone) it follows its own. A child
ending after its parent was deleted leaves no key behind.

The cleaner is stepped by hand here (workers run with ``clean_retention=False``),
so that each test decides when it passes: no sleeps standing for "it has run".
"""

from __future__ import annotations

import time

import gevent.event
import pytest
from helpers import wait_until
from test_waits import bump, count, parked

from redflow import Retention, define_workflow
from redflow.core.errors import RedflowError
from redflow.core.keys import Keys
from redflow.core.retention import DEFAULT_RETENTION
from redflow.engine.retention import RetentionCleaner
from redflow.store.enqueue import enqueue_children

CHILDREN = 8
NO_CLEANER = {"clean_retention": False}


def _family(registry, r, prefix, *, child_retention, parent_retention=None):
    """A parent fanning out to CHILDREN children; child 0 waits for the event
    ``release`` (so the parent stays parked), the others end at once."""

    @define_workflow("kid", retention=child_retention, registry=registry)
    def kid(ctx):
        ctx.step.run("count", lambda: bump(r, prefix, f"kid:{ctx.input}"))  # once a run: a resume replays it
        if ctx.input == 0:
            ctx.step.wait_for_event("hold", "release")
        return ctx.input * 2

    @define_workflow("family", retention=parent_retention, max_attempts=3, registry=registry)
    def family(ctx):
        return ctx.step.run_workflows("fan-out", "kid", list(range(CHILDREN)))

    return family


def _ended_but_one(client, r, prefix, handle):
    """Wait until the parent is parked on its children, all of which but child 0 ended."""
    wait_until(lambda: parked(client, handle.id, "children") and len(client.list_children(handle.id)) == CHILDREN, timeout=15)
    children = client.list_children(handle.id)
    wait_until(lambda: sum(client.get_run(c).status == "succeeded" for c in children) == CHILDREN - 1, timeout=15)
    wait_until(lambda: [count(r, prefix, f"kid:{n}") for n in range(CHILDREN)] == [1] * CHILDREN, timeout=15)
    return children


def _parked_family(start, client, registry, r, prefix, *, child_retention):
    """A worker (no cleaner of its own) and a parent parked on its children,
    all of which but child 0 ended more than their retention ago: (handle, children)."""
    family = _family(registry, r, prefix, child_retention=child_retention)
    start(concurrency=CHILDREN + 2, **NO_CLEANER)
    handle = family.run(None, client=client)
    children = _ended_but_one(client, r, prefix, handle)
    time.sleep(0.01)  # past a 1 ms retention
    return handle, children


def _release_and_collect(client, r, prefix, handle):
    """Let child 0 end: the parent collects every child's output, each child having run once."""
    client.emit_event("release")
    assert handle.result(15) == [n * 2 for n in range(CHILDREN)]
    assert [count(r, prefix, f"kid:{n}") for n in range(CHILDREN)] == [1] * CHILDREN


def _steps(cleaner, passes):
    for _ in range(passes):
        cleaner.step()


def _clean_until_gone(cleaner, client, run_ids, message):
    """Step ``cleaner`` until none of ``run_ids`` is left (held children are looked at again after a second)."""
    deadline = time.monotonic() + 15
    while any(client.get_run(run_id) is not None for run_id in run_ids):
        assert time.monotonic() < deadline, message
        cleaner.step()
        time.sleep(0.05)


def test_children_with_a_tiny_retention_stay_until_their_parent_collected_them(start, client, registry, r, prefix):
    handle, children = _parked_family(start, client, registry, r, prefix, child_retention=0.001)
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
    _steps(cleaner, 5)
    assert all(client.get_run(c) is not None for c in children), "a child was deleted while its parent waited for it"
    assert cleaner.purged == 0

    _release_and_collect(client, r, prefix, handle)
    assert client.get_run(handle.id).attempt == 1
    # The parent has ended: the children follow their own retention (the held ones are looked at again).
    _clean_until_gone(cleaner, client, children, "the children stayed after their parent ended")
    assert cleaner.purged == CHILDREN and client.get_run(handle.id).status == "succeeded"
    assert r.zcard(client.keys.retention_held()) == 0
    cleaner.stop()


def test_the_workers_cleaner_holds_children_until_their_parent_ended_then_deletes_them(start, client, registry, r, prefix):
    family = _family(registry, r, prefix, child_retention=0.001)
    start(concurrency=CHILDREN + 2, retention_interval_s=0.05)
    handle = family.run(None, client=client)
    children = _ended_but_one(client, r, prefix, handle)
    # The cleaner reached the ended children and noted them as held for their parent.
    wait_until(lambda: r.zcard(client.keys.retention_held()) == CHILDREN - 1, timeout=15, message="the children held")
    assert all(client.get_run(c) is not None for c in children)
    _release_and_collect(client, r, prefix, handle)
    wait_until(lambda: all(client.get_run(c) is None for c in children), timeout=15, message="the children deleted")
    assert r.zcard(client.keys.retention_held()) == 0 and client.get_run(handle.id).status == "succeeded"


def test_a_child_of_run_workflow_stays_while_its_parent_runs(start, client, registry, r, prefix):
    release = gevent.event.Event()

    @define_workflow("callee", retention=0.001, registry=registry)
    def callee(ctx):
        return ctx.input + 1

    @define_workflow("caller", retention=None, registry=registry)
    def caller(ctx):
        value = ctx.step.run_workflow("call", "callee", 41)
        ctx.step.run("hold", lambda: release.wait(30))
        return value

    start(concurrency=4, **NO_CLEANER)
    handle = caller.run(None, client=client)
    wait_until(lambda: len(client.list_children(handle.id)) == 1, timeout=15)
    (child,) = client.list_children(handle.id)
    wait_until(lambda: client.get_run(child).status == "succeeded", timeout=15)
    time.sleep(0.01)  # past the child's retention
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
    _steps(cleaner, 3)
    assert client.purge(older_than=0) == 0
    assert client.get_run(child) is not None and cleaner.purged == 0
    release.set()
    assert handle.result(15) == 42
    assert client.purge(older_than=0, workflow="callee") == 1
    cleaner.stop()


def test_held_children_whose_parent_is_purged_follow_their_own_retention(start, client, registry, r, prefix):
    handle, children = _parked_family(start, client, registry, r, prefix, child_retention=0.001)
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
    _steps(cleaner, 3)
    assert r.zcard(client.keys.retention_held()) == CHILDREN - 1 and cleaner.purged == 0
    assert client.cancel(handle.id)  # the parent ends (its waiting child is canceled too) and is deleted
    assert client.purge(older_than=0, workflow="family") == 1
    _clean_until_gone(cleaner, client, children, "children of a deleted parent stayed")
    assert cleaner.purged == CHILDREN and r.zcard(client.keys.retention_held()) == 0
    cleaner.stop()


def test_purge_keeps_the_children_of_an_unfinished_parent(start, client, registry, r, prefix):
    handle, children = _parked_family(start, client, registry, r, prefix, child_retention=None)
    assert client.purge(older_than=0, dry_run=True) == 0
    assert client.purge(older_than=0) == 0 and client.purge(older_than=0, workflow="kid") == 0
    assert all(client.get_run(c) is not None for c in children)

    _release_and_collect(client, r, prefix, handle)
    assert client.purge(older_than=0, workflow="kid") == CHILDREN  # the parent ended: they go
    assert client.purge(older_than=0) == 1


def test_max_finished_of_the_child_workflow_keeps_the_children_of_an_unfinished_parent(start, client, registry, r, prefix):
    handle, children = _parked_family(start, client, registry, r, prefix, child_retention=Retention(succeeded=None, max_finished=1))
    cleaner = RetentionCleaner(client.store, default=DEFAULT_RETENTION)
    _steps(cleaner, 5)
    assert all(client.get_run(c) is not None for c in children) and cleaner.purged == 0

    _release_and_collect(client, r, prefix, handle)
    deadline = time.monotonic() + 15
    while r.zcard(client.keys.workflow_runs("kid")) > 1:
        assert time.monotonic() < deadline, "max_finished did not apply once the parent ended"
        cleaner.step()
    assert cleaner.purged == CHILDREN - 1
    cleaner.stop()


def test_a_child_ending_after_its_parent_was_purged_leaves_no_key_behind(start, client, registry, r, prefix):
    release = gevent.event.Event()

    @define_workflow("slow-kid", retention=None, registry=registry)
    def slow_kid(ctx):
        bump(r, prefix, f"slow-kid:{ctx.input}")
        if ctx.input == 0:
            ctx.step.run("hold", lambda: release.wait(30))
        return ctx.input

    @define_workflow("doomed", retention=None, registry=registry)
    def doomed(ctx):
        return ctx.step.run_workflows("fan-out", "slow-kid", [0, 1])

    start(concurrency=4, **NO_CLEANER)
    handle = doomed.run(None, client=client)
    wait_until(lambda: parked(client, handle.id, "children") and count(r, prefix, "slow-kid:0") == 1, timeout=15)
    (running,) = [c for c in client.list_children(handle.id) if client.get_run(c).status == "running"]
    assert client.cancel(handle.id)  # the parent ends; its running child is asked to stop
    assert client.purge(older_than=0, workflow="doomed") == 1
    k = client.keys
    assert client.get_run(handle.id) is None and r.exists(k.run_children_ended(handle.id)) == 0

    release.set()  # the child ends (canceled at its next step boundary) and reports to a parent that is gone
    wait_until(lambda: client.get_run(running).status == "canceled", timeout=15)
    assert client.scripts.child_ended(child_id=running, parent_id=handle.id, parent_queue="default", now_ms=client.now_ms()) == "gone"
    left = list(r.scan_iter(match=f"{prefix}:*{handle.id}*", count=1000))
    assert [key for key in left if r.ttl(key) < 0] == []  # only its children's idempotency keys, which expire
    # The parent is gone: its children follow their own retention (kept forever here, until purged).
    assert client.purge(older_than=0, workflow="slow-kid") == 2


def test_a_child_started_for_a_parent_that_is_gone_creates_no_key_of_that_parent(client, registry, r, prefix):
    """A parent purged under a stale attempt, or a parent id that names no run:
    the child is created, its parent's children index is not."""

    @define_workflow("stray", registry=registry)
    def stray(ctx):
        return None

    handle = client.run(stray, None, parent_run_id="run_gone")
    requests = client.targets.children(stray, [1, 2], parent_run_id="run_gone", parent_queue="default", step="fan-out")
    started = enqueue_children(client.store, "run_gone", requests)
    assert client.get_run(handle.id).parent_run_id == "run_gone" and len(started) == 2
    left = list(r.scan_iter(match=f"{prefix}:*run_gone*", count=1000))
    assert left and [key for key in left if r.ttl(key) < 0] == []  # the children's idempotency keys expire
    assert client.list_children("run_gone") == []


def test_a_children_index_names_its_parents_run_key_on_both_layouts():
    for keys in (Keys("p"), Keys("p", cluster=True)):
        assert keys.run_of_children(keys.run_children("run_1", "emails")) == keys.run("run_1", "emails")
    with pytest.raises(RedflowError, match="not a children index"):
        Keys("p").run_of_children("p:run:run_1:steps")
