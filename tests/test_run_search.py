"""Tags and indexed run listings against a real redis-server: every filter
combination gives exactly the runs a full scan would, newest first, page by
page, also when pages come back short because their work is bounded."""

from __future__ import annotations

import itertools
import random

import pytest
from helpers import wait_until

from redflow import InputValidationError, NonRetryableError, define_workflow
from redflow.core.errors import RedflowError
from redflow.core.tags import MAX_TAGS
from redflow.store import run_search
from redflow.store.reads import index_queues


@pytest.fixture
def flows(registry):
    @define_workflow("orders", queue="work", registry=registry, max_attempts=1)
    def orders(ctx):
        if ctx.input.get("fail"):
            raise NonRetryableError("declined")
        return ctx.input

    @define_workflow("emails", queue="work", registry=registry, max_attempts=1)
    def emails(ctx):
        if ctx.input.get("fail"):
            raise NonRetryableError("bounced")
        return None

    @define_workflow("parked", queue="nobody", registry=registry)
    def parked(ctx):
        return None

    return registry


def all_pages(client, *, limit, **filters):
    runs, cursor, pages = [], None, 0
    while True:
        page = client.list_runs(limit=limit, cursor=cursor, **filters)
        assert len(page) <= limit
        runs += page
        pages += 1
        cursor = page.cursor
        if cursor is None:
            return runs, pages
        assert pages < 10_000


def test_tags_are_stored_on_the_run_and_shown_by_get_run(client, flows, r):
    handle = client.run("parked", {}, tags={"customer": "42", "tenant": "acme"})
    run = client.get_run(handle.id)
    assert run.tags == {"customer": "42", "tenant": "acme"}
    assert r.hget(client.keys.run(handle.id), "tagsJson") == '{"customer":"42","tenant":"acme"}'
    assert r.zscore(client.keys.tag("customer", "42"), handle.id) == r.zscore(client.keys.runs_created(), handle.id)
    assert r.zscore(client.keys.workflow_tag("parked", "tenant", "acme"), handle.id) is not None
    untagged = client.run("parked", {})
    assert client.get_run(untagged.id).tags == {} and r.hget(client.keys.run(untagged.id), "tagsJson") is None


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ({"customer": 42}, "must be a string, got int"),
        ({1: "x"}, "must be a string, got int"),
        ({"": "x"}, "must not be empty"),
        ({"k": ""}, "must not be empty"),
        ({"a=b": "x"}, "must not contain '='"),
        ({"k": "x" * 201}, "at most 200"),
        ({"k" * 65: "x"}, "at most 64"),
        ({"k": "line\nbreak"}, "control characters"),
        ({f"k{i}": "v" for i in range(MAX_TAGS + 1)}, f"at most {MAX_TAGS} tags"),
        (["customer", "42"], "must be a dict"),
    ],
)
def test_bad_tags_are_refused_with_a_clear_error_and_enqueue_nothing(client, flows, r, tags, message):
    with pytest.raises(InputValidationError, match=message):
        client.run("parked", {}, tags=tags)
    assert r.zcard(client.keys.runs_created()) == 0


def test_a_child_run_inherits_its_parents_tags_and_may_add_its_own(client, registry, start):
    @define_workflow("child", registry=registry)
    def child(ctx):
        return dict(ctx.run.tags)

    @define_workflow("parent", registry=registry)
    def parent(ctx):
        return ctx.step.run_workflow("kid", "child", {}, tags={"step": "kid", "tenant": "override"})

    start()
    handle = client.run("parent", {}, tags={"customer": "7", "tenant": "acme"})
    assert handle.result(10) == {"customer": "7", "step": "kid", "tenant": "override"}
    (kid,) = client.list_runs(workflow="child", tags={"customer": "7"})
    assert kid.parent_run_id == handle.id


def test_pages_of_a_tag_filter_are_newest_first_and_complete(client, flows):
    handles = [client.run("parked", {"n": n}, tags={"customer": "42" if n % 3 else "7"}) for n in range(250)]
    tagged = [client.get_run(h.id) for h in handles if client.get_run(h.id).tags["customer"] == "42"]
    expected = [run.id for run in sorted(tagged, key=lambda run: (run.created_at, run.id), reverse=True)]  # same ms: by id
    runs, pages = all_pages(client, limit=50, tags={"customer": "42"})
    assert [run.id for run in runs] == expected and pages == 4
    assert [run.id for run in client.list_runs(tags={"customer": "nobody"})] == []


def test_a_cursor_is_checked_against_its_filters(client, flows):
    for n in range(3):
        client.run("parked", {"n": n}, tags={"customer": "42"})
    page = client.list_runs(tags={"customer": "42"}, limit=1)
    assert page.cursor
    with pytest.raises(RedflowError, match="other filters"):
        client.list_runs(tags={"customer": "7"}, cursor=page.cursor)
    with pytest.raises(RedflowError, match="not a run listing cursor"):
        client.list_runs(tags={"customer": "42"}, cursor="garbage")
    with pytest.raises(RedflowError, match="limit"):
        client.list_runs(limit=0)


def test_failed_and_canceled_indexes_follow_the_runs_through_retries(client, flows, start, r):
    worker = start(queues=["work"])
    failed = client.run("orders", {"fail": True}, tags={"customer": "42"})
    wait_until(lambda: failed.status() == "failed", timeout=10)
    keys = client.keys
    assert r.zscore(keys.workflow_status("failed", "orders"), failed.id) is not None
    assert r.zscore(keys.tag_status("failed", "customer", "42"), failed.id) is not None
    assert [x.id for x in client.list_runs(workflow="orders", status="failed", tags={"customer": "42"})] == [failed.id]

    parked = client.run("parked", {}, tags={"customer": "42"})
    assert client.cancel(parked.id)
    assert r.zscore(keys.tag_status("canceled", "customer", "42"), parked.id) is not None
    assert [x.id for x in client.list_runs(status="canceled", tags={"customer": "42"})] == [parked.id]

    worker.stop()  # else the retried run fails again (and is indexed again)
    assert client.retry(parked.id) and client.retry(failed.id)
    for run_id in (failed.id, parked.id):
        for key in keys.terminal_index_keys(client.get_run(run_id).workflow, {"customer": "42"}):
            assert r.zscore(key, run_id) is None, key
    assert client.list_runs(status="canceled", tags={"customer": "42"}) == []


def make_mixed_runs(client, start, seed: int) -> None:
    """Runs of three workflows in five statuses with random tags, in random order."""
    rnd = random.Random(seed)
    start(queues=["work"])
    handles = []
    for n in range(240):
        tags = {k: rnd.choice(values) for k, values in (("customer", "abc"), ("tenant", "xy")) if rnd.random() < 0.7}
        workflow = rnd.choice(["orders", "emails", "parked"])
        delay = 3600 if workflow == "parked" and rnd.random() < 0.2 else None
        handles.append(client.run(workflow, {"fail": rnd.random() < 0.3, "n": n}, tags=tags or None, delay=delay))
    for h in rnd.sample(handles, 60):
        client.cancel(h.id)
    wait_until(lambda: client.count_runs("running") == 0 and client.redis.llen(client.keys.queue_ready("work")) == 0, timeout=20)


@pytest.mark.parametrize("intersect_max", [0, 25_000], ids=["walks-only", "redis-intersects-first-pages"])
def test_every_filter_combination_pages_through_exactly_what_a_full_scan_finds(client, flows, start, monkeypatch, intersect_max):
    make_mixed_runs(client, start, seed=18)
    monkeypatch.setattr(run_search, "INTERSECT_MAX", intersect_max)
    created = [client.keys.runs_created(queue) for queue in index_queues(client.store)]  # one per queue on a cluster
    everything = [client.get_run(run_id) for key in created for run_id in client.redis.zrange(key, 0, -1)]
    assert {run.status for run in everything} == {"queued", "scheduled", "succeeded", "failed", "canceled"}
    monkeypatch.setattr(run_search, "PAGE_SKIP", 5)  # short pages: the cursor must carry the walk on
    monkeypatch.setattr(run_search, "CALL_SKIP", 3)
    tag_filters = [None, {"customer": "a"}, {"tenant": "y"}, {"customer": "b", "tenant": "x"}, {"customer": "none"}]
    for workflow, status, tags in itertools.product(
        [None, "orders", "parked", "missing"], [None, "queued", "scheduled", "succeeded", "failed", "canceled"], tag_filters
    ):
        expected = {
            run.id
            for run in everything
            if (workflow is None or run.workflow == workflow)
            and (status is None or run.status == status)
            and all(run.tags.get(k) == v for k, v in (tags or {}).items())
        }
        runs, _ = all_pages(client, limit=7, workflow=workflow, status=status, tags=tags)
        ids = [run.id for run in runs]
        assert len(ids) == len(set(ids)) and set(ids) == expected, (workflow, status, tags)
        assert client.count_matching(workflow, status, tags=tags) == len(expected), (workflow, status, tags)


def test_list_runs_keeps_its_old_form_for_plain_filters(client, flows):
    handles = [client.run("parked", {"n": n}) for n in range(5)]
    newest = sorted((client.get_run(h.id) for h in handles), key=lambda run: (run.created_at, run.id), reverse=True)
    page = client.list_runs(workflow="parked", status="queued", limit=3)
    assert [run.id for run in page] == [run.id for run in newest[:3]] and isinstance(page, list)
    with pytest.raises(RedflowError, match="unknown run status"):
        client.list_runs(status="bogus")
