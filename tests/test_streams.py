"""Live output streams: ``ctx.stream``, ``handle.stream``, ``client.read_stream``.

In-process workers on the private redis-server. The invariants:

- a reader gets a run's items in the order they were written, each once, and
  every item a still-owning attempt wrote: a retry's items follow the earlier
  attempts' (kept, each with its attempt number);
- a resumed run (after a durable wait) does not write again what it streamed
  before it parked; a worker's death makes its run's new execution write again
  only what it streamed after its last park (at least once);
- an attempt that lost its run (another took it over) or whose run ended writes
  nothing more;
- a reader blocked on a run wakes when the run ends, whichever way it ends,
  without polling (the end entry on its signal stream); a run that ended long
  ago gives its items and the end at once;
- the stream is bounded, and deleted with its run (purge, retention).
"""

from __future__ import annotations

import gevent
import pytest
from gevent.event import Event
from helpers import wait_until
from test_stale_attempts import bump, gate, open_gate, stall

from redflow import RedflowError, RunNotFoundError, SerializationError, TimeoutError, create_client, define_workflow
from redflow.core.models.streams import StreamField
from redflow.core.streams import MAX_ITEMS
from redflow.store import streams

#: A block slice no test waits out: a follower that ends sooner was woken by the run's end entry.
NEVER_S = 120.0


def follow_in_background(client, run_id, **options):
    """A greenlet following the run's stream (with a block slice it never waits out); its items in ``got``."""
    got = []

    def follow():
        for item in streams.follow(client.store, run_id, slice_s=NEVER_S, **options):
            got.append(item)
        return got

    return gevent.spawn(follow), got


def values(items):
    return [item.value for item in items]


# -- writing and reading -------------------------------------------------------------------------------


def test_items_are_read_in_order_with_their_attempt_and_retries_keep_earlier_attempts_items(start, client, registry):
    @define_workflow("tokens", registry=registry, max_attempts=3)
    def tokens(ctx):
        for token in ("Hel", "lo", f"#{ctx.run.attempt}"):
            ctx.stream({"token": token})
        if ctx.run.attempt < 3:
            raise RuntimeError("again")
        return "done"

    start()
    handle = client.run("tokens", None)
    assert handle.result(10) == "done"
    items = client.read_stream(handle.id, limit=1000)
    assert [(item.attempt, item.value["token"]) for item in items] == [
        (attempt, token) for attempt in (1, 2, 3) for token in ("Hel", "lo", f"#{attempt}")
    ]
    ids = [item.id for item in items]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-")))) and len(set(ids)) == 9
    assert [item_id for item_id, _ in items] == ids  # (id, value) pairs
    assert all(item.written_at > 0 for item in items)
    # paged by id: every page starts after the last id of the one before
    pages, after = [], None
    while True:
        page = client.read_stream(handle.id, after=after, limit=4)
        if not page:
            break
        pages.append(page)
        after = page[-1].id
    assert [len(page) for page in pages] == [4, 4, 1] and [item for page in pages for item in page] == items
    assert list(handle.stream()) == items  # a run that ended: its items, then the end


def test_a_resumed_run_does_not_stream_again_what_it_streamed_before_it_parked(start, client, registry):
    @define_workflow("napper", registry=registry)
    def napper(ctx):
        ctx.stream("before")
        ctx.step.sleep("nap", 0.1)
        ctx.stream("between")
        approval = ctx.step.wait_for_event("approval", "approved", timeout=30)
        ctx.stream({"after": approval})
        return "done"

    start()
    handle = client.run("napper", None)
    wait_until(lambda: (client.get_run(handle.id).parked_for or "") == "event", timeout=10)
    client.emit_event("approved", {"by": "ada"})
    assert handle.result(10) == "done"
    items = client.read_stream(handle.id)
    assert values(items) == ["before", "between", {"after": {"by": "ada"}}]
    assert {item.attempt for item in items} == {1}


def test_items_from_several_greenlets_of_a_handler_are_all_written(start, client, registry):
    @define_workflow("fan", registry=registry)
    def fan(ctx):
        def part(name):
            for n in range(10):
                ctx.stream(f"{name}{n}")
                gevent.sleep(0)

        gevent.joinall([gevent.spawn(part, name) for name in "abc"], raise_error=True)
        return "done"

    start()
    handle = client.run("fan", None)
    assert handle.result(10) == "done"
    got = values(client.read_stream(handle.id))
    assert sorted(got) == sorted(f"{name}{n}" for name in "abc" for n in range(10))
    for name in "abc":
        assert [v for v in got if v[0] == name] == [f"{name}{n}" for n in range(10)]


def test_a_value_that_is_not_json_raises_a_clear_error_and_writes_nothing(start, client, registry, r):
    @define_workflow("bad-item", registry=registry)
    def bad_item(ctx):
        errors = []
        for value in ({"when": {1, 2}}, {"n": 2**70}, object()):
            try:
                ctx.stream(value)
            except SerializationError as exc:
                errors.append(str(exc))
        return errors

    start()
    handle = client.run("bad-item", None)
    assert handle.result(10) == [
        'stream item["when"] is a set: JSON has no sets, pass a list',
        'stream item["n"] is an int beyond 64 bits: pass it as a str',
        "stream item is an object, which JSON cannot hold: pass dicts, lists, str, int, float, bool or None",
    ]
    assert client.read_stream(handle.id) == []
    assert r.exists(client.keys.run_stream(handle.id), client.keys.run_stream_signal(handle.id)) == 0
    assert r.hget(client.keys.run(handle.id), StreamField.ENABLED) is None


def test_bad_reads_raise_clear_errors(client, registry):
    @define_workflow("idle", registry=registry)
    def idle(ctx):
        return None

    handle = client.run(idle, None)
    with pytest.raises(RunNotFoundError):
        client.read_stream("run_nope")
    with pytest.raises(RunNotFoundError):
        client.follow_stream("run_nope")  # at the call, not at the first item
    with pytest.raises(RunNotFoundError):
        streams.StreamFollower(client.store, "run_nope").read()
    for after in ("abc", "1-", "-1-0", "1-2-3", " 1-0", 5, b"1-0", "18446744073709551616-0", "18446744073709551615-18446744073709551615"):
        with pytest.raises(RedflowError, match="after= must be None or a stream item id"):
            client.read_stream(handle.id, after=after)
        with pytest.raises(RedflowError, match="after= must be None or a stream item id"):
            handle.stream(after=after)
    for limit in (0, -1, 1001, True, "5", 2.0, None):
        with pytest.raises(RedflowError, match="limit must be an int from 1 to 1000"):
            client.read_stream(handle.id, limit=limit)
    for timeout in (0, -1.0, "5", True, float("nan"), float("inf")):
        with pytest.raises(RedflowError, match="timeout must be None or a number of seconds > 0"):
            handle.stream(timeout=timeout)
    assert client.read_stream(handle.id, after="18446744073709551615-0", limit=1000) == []


def test_past_its_bound_a_stream_keeps_its_newest_items(start, client, registry, r):
    extra = 250

    @define_workflow("flood", registry=registry)
    def flood(ctx):
        for n in range(MAX_ITEMS + extra):
            ctx.stream(n)
        return "done"

    start()
    handle = client.run("flood", None)
    assert handle.result(60) == "done"
    length = r.xlen(client.keys.run_stream(handle.id))
    assert MAX_ITEMS <= length < MAX_ITEMS + 100  # MAXLEN ~: Redis drops whole nodes of 100 entries
    kept = [item.value for item in handle.stream()]
    assert kept == list(range(MAX_ITEMS + extra - length, MAX_ITEMS + extra))
    oldest = client.read_stream(handle.id, limit=1)[0]
    assert oldest.value == MAX_ITEMS + extra - length
    # a reader whose place was trimmed away goes on from the oldest item kept
    first_id_written = f"{int(oldest.id.split('-')[0]) - 10_000}-0"
    assert client.read_stream(handle.id, after=first_id_written, limit=1)[0] == oldest


# -- following a run live ---------------------------------------------------------------------------------


def test_a_reader_gets_items_live_and_wakes_when_the_run_ends(start, client, registry):
    step = Event()

    @define_workflow("live", registry=registry)
    def live(ctx):
        for n in range(3):
            ctx.stream(n)
            step.wait(30)
            step.clear()
        return "done"

    start()
    handle = client.run("live", None)
    reader, got = follow_in_background(client, handle.id)
    for n in range(3):
        wait_until(lambda n=n: values(got) == list(range(n + 1)), timeout=10)
        step.set()
    assert values(reader.get(timeout=30)) == [0, 1, 2]  # its block slice (120 s) was never waited out
    assert handle.status() == "succeeded"


def test_a_reader_of_a_run_that_never_streams_wakes_when_it_ends(start, client, registry, r):
    go = Event()

    @define_workflow("quiet", registry=registry)
    def quiet(ctx):
        go.wait(30)
        return "done"

    start()
    handle = client.run("quiet", None)
    wait_until(lambda: handle.status() == "running")
    reader, got = follow_in_background(client, handle.id)
    wait_until(lambda: r.hget(client.keys.run(handle.id), StreamField.ENABLED) == "1")  # the reader asked to hear of its end
    go.set()
    assert reader.get(timeout=30) == []


@pytest.mark.parametrize("when", ["queued", "running"])
def test_a_reader_wakes_when_the_run_is_canceled(start, client, registry, when):
    started = Event()

    @define_workflow("cancel-me", registry=registry)
    def cancel_me(ctx):
        ctx.stream("started")
        started.set()
        gevent.sleep(60)

    handle = client.run("cancel-me", None)
    if when == "running":
        start()
        started.wait(10)
    reader, got = follow_in_background(client, handle.id)
    wait_until(lambda: client.redis.hget(client.keys.run(handle.id), StreamField.ENABLED) == "1")
    assert handle.cancel()
    assert values(reader.get(timeout=30)) == (["started"] if when == "running" else [])
    assert handle.status() == "canceled"


def test_a_reader_times_out_when_the_run_has_not_ended(held):
    handle, _ = held
    got = []
    with pytest.raises(TimeoutError, match="has not ended"):
        for item in handle.stream(timeout=0.3):
            got.append(item.value)
    assert got == ["one"]


def test_a_reader_of_a_run_deleted_meanwhile_ends(held, client, r):
    handle, _ = held
    reader = gevent.spawn(lambda: list(streams.follow(client.store, handle.id, slice_s=0.2)))
    gevent.sleep(0.3)
    r.delete(client.keys.run(handle.id))  # deleted under it (as by an operator): it stops at its next slice
    assert values(reader.get(timeout=30)) == ["one"]


# -- several workers, kills and stalls ---------------------------------------------------------------------


def test_many_runs_on_two_workers_each_stream_all_their_items_in_order_to_their_readers(start, client, registry):
    @define_workflow("many", registry=registry)
    def many(ctx):
        for n in range(20):
            ctx.stream([ctx.input, n])
            gevent.sleep(0.001 * (n % 3))
        return ctx.input

    handles = [client.run("many", i) for i in range(30)]
    readers = [gevent.spawn(lambda h=h: list(h.stream(timeout=60))) for h in handles]
    start(concurrency=8)
    start(concurrency=8)
    for i, (handle, reader) in enumerate(zip(handles, readers)):
        assert values(reader.get(timeout=60)) == [[i, n] for n in range(20)]
        assert handle.result(5) == i


def test_an_attempt_that_lost_its_run_writes_no_more_items(start, client, registry, r, prefix):
    """A stalled attempt (its lease lapsed) and the one that took the run over both
    stream; once the new one started, the stalled one's next item is refused."""

    @define_workflow("taken-over", registry=registry)
    def taken_over(ctx):
        n = bump(r, prefix, "executions")
        ctx.stream({"execution": n, "at": "start"})
        gate(r, prefix, f"go{n}")
        ctx.stream({"execution": n, "at": "end"})
        return n

    stalled = start(concurrency=1)
    handle = client.run("taken-over", None)
    wait_until(lambda: len(client.read_stream(handle.id)) == 1)
    stall(stalled, r, client, handle.id)
    start(concurrency=1)  # takes the run over once it is reaped
    wait_until(lambda: len(client.read_stream(handle.id)) == 2, timeout=10)
    open_gate(r, prefix, "go1")  # the stalled handler streams again: refused, it stops
    wait_until(lambda: stalled.stats["abandoned"] == 1, timeout=10, message="the stalled attempt to stop")
    open_gate(r, prefix, "go2")
    assert handle.result(10) == 2
    assert values(client.read_stream(handle.id)) == [
        {"execution": 1, "at": "start"}, {"execution": 2, "at": "start"}, {"execution": 2, "at": "end"},
    ]  # fmt: skip
    assert {item.attempt for item in client.read_stream(handle.id)} == {1}  # a takeover is not a retry


def test_a_takeover_after_a_park_streams_again_only_what_came_after_the_park(start, client, registry, r, prefix):
    @define_workflow("park-then-stall", registry=registry)
    def park_then_stall(ctx):
        ctx.stream("before the nap")
        ctx.step.sleep("nap", 0.05)
        n = bump(r, prefix, "after-nap")
        ctx.stream(f"after the nap ({n})")
        gate(r, prefix, f"go{n}")
        return n

    stalled = start(concurrency=1)
    handle = client.run("park-then-stall", None)
    wait_until(lambda: len(client.read_stream(handle.id)) == 2, timeout=10)
    stall(stalled, r, client, handle.id)
    start(concurrency=1)
    wait_until(lambda: len(client.read_stream(handle.id)) == 3, timeout=10)
    open_gate(r, prefix, "go2")
    assert handle.result(10) == 2
    assert values(client.read_stream(handle.id)) == ["before the nap", "after the nap (1)", "after the nap (2)"]
    open_gate(r, prefix, "go1")


def test_a_greenlet_its_handler_left_behind_cannot_stream_once_the_run_ended(start, client, registry):
    refused = []

    @define_workflow("leaves-a-greenlet", registry=registry)
    def leaves_a_greenlet(ctx):
        def late():
            gevent.sleep(0.2)
            try:
                ctx.stream("late")
            except RedflowError as exc:
                refused.append(str(exc))

        gevent.spawn(late)
        ctx.stream("on time")
        return "done"

    worker = start()
    handle = client.run("leaves-a-greenlet", None)
    assert handle.result(10) == "done"
    wait_until(lambda: refused, timeout=10)
    assert refused == [f"run {handle.id} has ended (succeeded): its stream takes no more items"]
    assert values(client.read_stream(handle.id)) == ["on time"] and worker.keeper.renewals_lost == 0


# -- deleted with the run ------------------------------------------------------------------------------------


def test_purge_deletes_the_stream_with_the_run_and_the_asyncio_packages_passes_too(start, client, registry, r):
    @define_workflow("short-lived", registry=registry)
    def short_lived(ctx):
        ctx.stream("x")
        return None

    start()
    handle = client.run("short-lived", None)
    handle.result(10)
    k = client.keys
    # what a 0.1.x worker and reader would have added: a second pass, a reader's cursor
    r.xadd(k.run_stream(handle.id, pass_number=2), {"record": "{}"})
    r.hset(k.run(handle.id), StreamField.MAX_PASS, "2")
    r.hset(k.run_stream_cursors(handle.id), "c", "{}")
    stream_keys = [k.run_stream(handle.id), k.run_stream(handle.id, pass_number=2), k.run_stream_signal(handle.id),
                   k.run_stream_cursors(handle.id)]  # fmt: skip
    assert r.exists(*stream_keys) == 4
    assert client.purge(older_than=0) == 1
    assert r.exists(*stream_keys) == 0
    with pytest.raises(RunNotFoundError):
        client.read_stream(handle.id)


def test_retention_deletes_the_stream_with_the_run(start, client, registry, r):
    @define_workflow("kept-briefly", registry=registry, retention=1)
    def kept_briefly(ctx):
        ctx.stream("x")
        return None

    start(retention_interval_s=0.1)
    handle = client.run("kept-briefly", None)
    handle.result(10)
    wait_until(lambda: client.get_run(handle.id) is None, timeout=15, message="retention to delete the run")
    assert r.exists(client.keys.run_stream(handle.id), client.keys.run_stream_signal(handle.id)) == 0


def test_a_reader_on_a_connection_with_a_short_socket_timeout_waits_on(held, redis_url, prefix):
    """Redis's reply to a block longer than the socket timeout comes too late for redis-py:
    the reader takes that as a slice that brought nothing, and goes on."""
    handle, go = held
    impatient = create_client(f"{redis_url}?socket_timeout=0.2", prefix=prefix)
    try:
        reader = gevent.spawn(lambda: values(streams.follow(impatient.store, handle.id, slice_s=1.0)))
        gevent.sleep(0.8)  # a few socket timeouts
        assert not reader.ready()
        go.set()
        assert reader.get(timeout=30) == ["one", "two"]
    finally:
        impatient.close()
