"""Slots sharing a pipelined connection: every caller gets its own reply, in
every order, through error replies, interrupts, dropped connections, a Redis
that stops answering and writes larger than the socket's buffer."""

from __future__ import annotations

import time

import gevent
import pytest
import redis
from helpers import wait_until
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from redflow.store.mux_connection import MuxConnection, shared_connections, supports_mux


@pytest.fixture
def mux(redis_url):
    source = redis.Redis.from_url(redis_url, decode_responses=True)
    conn = MuxConnection(source)
    yield conn
    conn.close()
    source.close()


def test_hundreds_of_greenlets_each_get_their_own_reply(mux, prefix):
    def call(i: int) -> tuple[int, object, object]:
        gevent.sleep(0.001 * (i % 7))  # interleave the callers
        return i, mux.execute("SET", f"{prefix}:k{i}", f"v{i}"), mux.execute("GET", f"{prefix}:k{i}")

    results = [g.value for g in gevent.joinall([gevent.spawn(call, i) for i in range(300)], raise_error=True)]
    assert sorted(results) == [(i, "OK", f"v{i}") for i in range(300)]


def test_an_error_reply_goes_to_its_caller_and_the_others_are_not_shifted(mux, prefix):
    mux.execute("SET", f"{prefix}:s", "text")
    greenlets = [gevent.spawn(mux.execute, "INCR", f"{prefix}:s")] + [gevent.spawn(mux.execute, "ECHO", str(i)) for i in range(20)]
    gevent.joinall(greenlets)
    assert isinstance(greenlets[0].exception, ResponseError)
    assert [g.value for g in greenlets[1:]] == [str(i) for i in range(20)]


def test_a_caller_interrupted_while_waiting_leaves_the_connection_in_step(mux, r, prefix):
    r.execute_command("CLIENT", "PAUSE", "300", "ALL")  # Redis holds every other client's commands
    waiting = gevent.spawn(mux.execute, "ECHO", "dropped")
    gevent.sleep(0.05)
    waiting.kill(block=True)  # its reply comes later and is dropped
    assert waiting.dead and isinstance(waiting.value, gevent.GreenletExit)
    assert mux.execute("ECHO", "after") == "after"
    assert [mux.execute("ECHO", str(i)) for i in range(5)] == [str(i) for i in range(5)]


def test_a_command_sent_from_the_hub_on_a_connection_not_open_yet_leaves_once_it_opens(mux, r, prefix):
    """``send`` runs in the hub (step records sent behind), which cannot wait on a connect: the
    first send on a connection no call opened yet (a slot whose run a claimer started) opens it
    from a greenlet of its own, and what was sent leaves in order."""
    replies: list[object] = []
    hub = gevent.get_hub()
    hub.loop.run_callback(lambda: [mux.send(("INCR", f"{prefix}:sent"), replies.append) for _ in range(3)])
    wait_until(lambda: len(replies) == 3, timeout=5)
    assert replies == [1, 2, 3] and r.get(f"{prefix}:sent") == "3"
    assert mux.execute("ECHO", "then") == "then"


def test_a_send_on_a_connection_that_cannot_open_tells_its_callback_the_error(redis_url):
    source = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)  # nothing listens there
    conn = MuxConnection(source)
    replies: list[object] = []
    gevent.get_hub().loop.run_callback(lambda: conn.send(("PING",), replies.append))
    wait_until(lambda: replies, timeout=5)
    assert isinstance(replies[0], redis.ConnectionError)
    source.close()


def test_a_killed_connection_is_opened_again_and_the_waiting_calls_are_sent_again(mux, r, prefix):
    assert mux.execute("ECHO", "open") == "open"  # open before the kill (else the kill may come before the connect, and kill none)
    waiting = [gevent.spawn(mux.execute, "INCR", f"{prefix}:n") for _ in range(50)]
    killed = r.execute_command("CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal")
    gevent.joinall(waiting, raise_error=True)
    assert killed >= 1
    # each call was answered once or sent again once: every caller got a number, none an error
    assert all(isinstance(g.value, int) for g in waiting) and 50 <= int(r.get(f"{prefix}:n")) <= 100
    assert mux.execute("ECHO", "alive") == "alive"


def test_a_redis_that_stops_answering_is_seen_overdue_and_its_callers_fail_cleanly(redis_url, r):
    source = redis.Redis.from_url(redis_url, decode_responses=True)
    mux = MuxConnection(source, timeout_s=0.2)
    try:
        assert mux.execute("ECHO", "open") == "open"
        r.execute_command("CLIENT", "PAUSE", "1000", "ALL")
        slow = gevent.spawn(mux._call, ("ECHO", "late"))  # one try: no resend
        wait_until(lambda: mux.overdue(time.monotonic()))
        mux.abort()
        slow.join(2)
        assert isinstance(slow.exception, RedisTimeoutError)
        assert mux.execute("ECHO", "back") == "back"  # a new connection
    finally:
        mux.close()
        source.close()


def test_a_write_larger_than_the_socket_buffer_goes_out_whole(mux, prefix):
    big = "x" * (8 * 1024 * 1024)
    calls = [gevent.spawn(mux.execute, "SET", f"{prefix}:big{i}", big) for i in range(3)]
    gevent.joinall(calls, raise_error=True)
    assert [len(mux.execute("GET", f"{prefix}:big{i}")) for i in range(3)] == [len(big)] * 3


def test_tls_connections_are_not_shared_and_a_worker_splits_its_slots_over_a_few(redis_url):
    tls = redis.Redis(host="127.0.0.1", port=1, ssl=True)
    plain = redis.Redis.from_url(redis_url)
    try:
        assert not supports_mux(tls) and shared_connections(tls, 500) == []
        assert supports_mux(plain) and len(shared_connections(plain, 500)) == 8 and len(shared_connections(plain, 10)) == 1
    finally:
        tls.close()
        plain.close()


@pytest.mark.parametrize("share", [True, False], ids=["shared", "one-per-slot"])
def test_a_worker_runs_the_same_with_shared_or_own_connections(start, registry, client, r, share):
    from redflow import define_workflow

    @define_workflow("stepper", registry=registry)
    def stepper(ctx):
        return [ctx.step.run(f"s{i}", lambda i=i: i) for i in range(3)]

    worker = start(concurrency=40, share_connections=share)
    handles = [stepper.run(None, client=client) for _ in range(200)]
    assert all(h.result(20) == [0, 1, 2] for h in handles)
    assert worker.in_flight == 0
    # idle again: the queue's claimer waits in BLMOVE (engine/claimer.py), no slot holds a connection for it
    wait_until(lambda: sum(1 for c in r.client_list() if c["cmd"] == "blmove") == 1)
