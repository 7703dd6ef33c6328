"""Many slots' commands over one connection, pipelined by the event loop.

At saturation every slot makes one script call per run and waits for its
reply. On a connection of its own, each call costs the worker a send, one or
two receives and a trip through the hub: most of its CPU per run. So the
slots of a worker share a few :class:`MuxConnection`\\ s instead: the calls
made in one turn of gevent's loop leave in one send, one receive brings many
replies back, and each reply goes to its caller in order (Redis answers a
connection's commands in the order they came, so a FIFO of waiters matches
replies to callers). It also lowers Redis's own cost per command (fewer
reads).

The reading and writing happen in the hub, on the socket's file descriptor
(``os.read``/``os.write`` on a non-blocking socket); a slot only queues its
command and waits (:class:`gevent.hub.Waiter`). An interrupt thrown into a
waiting slot leaves the connection in step: its reply is read and dropped.
Blocking commands (BLMOVE) cannot share a connection: each slot keeps a
:class:`~redflow.store.slot_connection.SlotConnection` for them. TLS
connections keep one connection per slot (see :func:`supports_mux`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import gevent
import hiredis
import redis
from gevent.hub import Waiter
from gevent.lock import Semaphore
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from redflow.store.connection import is_cluster
from redflow.store.slot_connection import DEFAULT_COMMAND_TIMEOUT_S, ClusterSlotConnection, ScriptRunner, SlotConnection, parse_error

_READ_SIZE = 65536
_READ, _WRITE = 1, 2


def supports_mux(source: redis.Redis) -> bool:
    """Plain TCP and unix sockets: their bytes are the protocol's. A TLS
    socket's are not, so a TLS worker keeps one connection per slot."""
    return not issubclass(source.connection_pool.connection_class, redis.SSLConnection)


class _Callback:
    """A reply's receiver that is a function, not a waiting greenlet (:meth:`MuxConnection.send`)."""

    __slots__ = ("on_reply",)

    def __init__(self, on_reply: Callable[[Any], object]) -> None:
        self.on_reply = on_reply

    def switch(self, reply: Any) -> None:
        self.on_reply(reply)


class MuxConnection(ScriptRunner):
    """One connection shared by several slots; ``execute`` and ``run_script``
    as on a :class:`~redflow.store.slot_connection.SlotConnection`."""

    def __init__(self, source: redis.Redis, *, timeout_s: float | None = None) -> None:
        pool = source.connection_pool
        self._conn = pool.connection_class(**pool.connection_kwargs)
        self._encoding = pool.connection_kwargs.get("encoding", "utf-8")
        self.timeout_s = timeout_s or max(float(pool.connection_kwargs.get("socket_timeout") or 0), DEFAULT_COMMAND_TIMEOUT_S)
        self._hub = gevent.get_hub()
        self._opening = Semaphore()
        self._fd = -1
        self._reader: Any = None
        self._read_watcher: Any = None
        self._write_watcher: Any = None
        self._waiters: deque[tuple[Waiter | _Callback, float]] = deque()  # (waiter, deadline), in sending order
        self._out = bytearray()  # packed commands not written yet
        self._flush_queued = False

    # -- the slots' side -------------------------------------------------------
    def execute(self, *args: Any, block_s: float = 0.0) -> Any:
        """Send one command and return its reply; a broken connection is opened
        again and the command sent once more (redflow's slot commands are safe
        to repeat)."""
        if block_s:
            raise ValueError("a blocking command cannot share a connection")
        try:
            return self._call(args)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            return self._call(args)

    def _call(self, args: tuple[Any, ...]) -> Any:
        if self._fd < 0:
            self._open()
        waiter = Waiter(self._hub)
        self._queue(args, waiter)
        reply = waiter.get()
        if isinstance(reply, Exception):
            raise reply
        return reply

    def send(self, args: Sequence[Any], on_reply: Callable[[Any], object]) -> None:
        """Send one command without waiting for it: ``on_reply`` gets its reply (an
        exception when it failed or the connection broke) in the hub, and must not
        block. For work the caller need not wait on (step records sent behind,
        engine/step_records.py): the command leaves with the next send, in order. It may
        be called in the hub, which cannot wait on a connect: a connection not open yet
        (a slot whose run a claimer started has sent nothing on it) is opened by a
        greenlet of its own, and the command leaves once it is."""
        self._queue(args, _Callback(on_reply))
        if self._fd < 0:
            gevent.spawn(self._open_then_send)

    def _open_then_send(self) -> None:
        try:
            self._open()
        except (RedisError, OSError) as exc:  # the commands queued meanwhile hear it
            self._fail(exc if isinstance(exc, RedisError) else RedisConnectionError(str(exc)))
            return
        self._write_pending()

    def _queue(self, args: Sequence[Any], waiter: Waiter | _Callback) -> None:
        self._out += hiredis.pack_command(tuple(args))
        self._waiters.append((waiter, time.monotonic() + self.timeout_s))
        if not self._flush_queued:
            self._flush_queued = True
            self._hub.loop.run_callback(self._flush)

    def _open(self) -> None:
        with self._opening:
            if self._fd >= 0:
                return
            conn = self._conn
            try:
                conn.connect()  # handshake: AUTH / HELLO, SELECT, client name
            except RedisError:
                conn.disconnect()
                raise
            self._reader = hiredis.Reader(replyError=parse_error, encoding=self._encoding, errors="replace")
            self._fd = conn._sock.fileno()  # non-blocking, as gevent makes every socket
            self._read_watcher = self._hub.loop.io(self._fd, _READ)
            self._read_watcher.start(self._on_readable)

    # -- the hub's side --------------------------------------------------------
    def _flush(self) -> None:
        self._flush_queued = False
        if self._write_watcher is None:
            self._write_pending()

    def _write_pending(self) -> None:
        out = self._out
        if not out or self._fd < 0:
            return
        try:
            written = os.write(self._fd, out)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._fail(RedisConnectionError(f"Error writing to Redis: {exc}"))
            return
        del out[:written]
        if out and self._write_watcher is None:  # the socket's buffer is full: wait until it drains
            self._write_watcher = self._hub.loop.io(self._fd, _WRITE)
            self._write_watcher.start(self._on_writable)

    def _on_writable(self) -> None:
        self._write_pending()
        if not self._out and self._write_watcher is not None:
            self._write_watcher.stop()
            self._write_watcher = None

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(RedisConnectionError(f"Error reading from Redis: {exc}"))
            return
        if not data:
            self._fail(RedisConnectionError("Connection closed by server (or aborted by the watchdog)"))
            return
        reader = self._reader
        reader.feed(data)
        reply = reader.gets()
        while reply is not False:
            waiter, _ = self._waiters.popleft()
            waiter.switch(reply)  # the slot runs until it waits again, then the hub comes back here
            if reader is not self._reader:  # that slot's next call found the connection failed and reopened it
                return
            reply = reader.gets()

    def _fail(self, error: Exception) -> None:
        """The connection broke: every caller waiting on it gets ``error``; the next call opens a new one."""
        waiters, self._waiters = self._waiters, deque()
        self._close_socket()
        for waiter, _ in waiters:
            waiter.switch(error)

    def _close_socket(self) -> None:
        for watcher in (self._read_watcher, self._write_watcher):
            if watcher is not None:
                watcher.stop()
                watcher.close()
        self._read_watcher = self._write_watcher = None
        self._fd = -1
        self._reader = None
        self._out.clear()
        self._conn.disconnect()

    # -- the worker's watchdog and stop ----------------------------------------
    def overdue(self, now: float) -> bool:
        return bool(self._waiters) and now > self._waiters[0][1]

    def abort(self) -> None:
        """A reply is overdue (a Redis that stopped answering): fail the waiting calls."""
        if self._fd >= 0:
            self._hub.loop.run_callback(self._fail, RedisTimeoutError("Redis did not answer in time; connection dropped"))

    def stop_blocking(self) -> None:
        """Nothing blocks on a shared connection."""

    def close(self) -> None:
        """Close the connection; calls still waiting (none, after a worker's stop) fail."""
        if self._waiters:
            self._hub.loop.run_callback(self._fail, RedisConnectionError("connection closed"))
        elif self._fd >= 0:
            self._close_socket()


#: What a slot sends its calls on: its own connection, or one it shares.
Connection = SlotConnection | ClusterSlotConnection | MuxConnection

#: Slots per shared connection: enough to fill a send at saturation, few
#: enough that one connection's hiccup stalls a small share of the slots.
SLOTS_PER_CONNECTION = 64


def shared_connections(client: Any, slots: int) -> list[Any]:
    """The connections a worker's ``slots`` share for everything but blocking
    claims (on a cluster, one per master each); none for TLS (see :func:`supports_mux`)."""
    count = max(1, -(-slots // SLOTS_PER_CONNECTION))
    if is_cluster(client):
        node = client.get_default_node()
        if node is None or not supports_mux(node.redis_connection):
            return []
        return [ClusterSlotConnection(client, factory=MuxConnection) for _ in range(count)]
    if not supports_mux(client):
        return []
    return [MuxConnection(client) for _ in range(count)]
