"""The dedicated Redis connections of a worker's consumer slots.

A slot's commands (claim, start, step records, settle) bypass redis-py's
client layer: see :class:`SlotConnection`. In Redis Cluster a slot talks to
the master of each queue's hash slot through :class:`ClusterSlotConnection`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent
import hiredis
import redis
from redis._parsers.base import BaseParser
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, NoScriptError, RedisError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from redflow.store.connection import is_cluster
from redflow.store.library import LibraryFunction, missing_function_as_noscript

log = logging.getLogger("redflow.slot_connection")

#: A slot command that has no reply after this long (plus its own blocking
#: time) is aborted by the watchdog and retried on a new connection.
DEFAULT_COMMAND_TIMEOUT_S = 10.0
_READ_SIZE = 65536


class ScriptRunner:
    """``run_script`` / ``function_load`` over a connection's own ``execute``
    (shared by the dedicated and the multiplexed slot connections)."""

    def execute(self, *args: Any, block_s: float = 0.0) -> Any:
        raise NotImplementedError

    def run_script(self, script: LibraryFunction, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Call one function of redflow's library, loading the library where Redis lost it."""
        try:
            return self.execute(*script.command(keys, args))
        except NoScriptError:
            script.library.load(self)
            return self.execute(*script.command(keys, args))

    def function_load(self, source: str, replace: bool = True) -> str:
        return str(self.execute("FUNCTION", "LOAD", *(["REPLACE"] if replace else []), source))


class SlotConnection(ScriptRunner):
    """One dedicated connection (not taken from a shared pool) for one worker slot.

    redis-py's ``Connection`` opens it (so URL options, AUTH/ACL users, TLS
    and the database all apply); after that, commands go straight to its
    socket through a private hiredis reader: no pool checkout, no response
    callbacks and no per-call socket timer, about half the CPU of
    ``Redis.execute_command`` on the hot path. Instead of a socket timeout,
    each command sets ``deadline`` and the worker's watchdog aborts a
    connection that is overdue (a Redis that stopped answering).

    It speaks enough of the redis-py client interface (``function_load``)
    for redflow's library to be loaded through it. A command that
    fails on a broken connection is sent once more on a fresh one; every
    command redflow sends on a slot is safe to repeat (the scripts are
    idempotent for the same lease token). Any other exception, including
    an interrupt thrown into the greenlet mid-reply, drops the connection so
    that no half-read reply is ever reused.
    """

    __slots__ = ("_conn", "_lock", "_sock", "_reader", "_encoding", "timeout_s", "deadline", "_blocking", "_stopping", "_client_id")

    def __init__(self, source: redis.Redis, *, timeout_s: float | None = None) -> None:
        pool = source.connection_pool
        self._conn = pool.connection_class(**pool.connection_kwargs)
        self._lock = threading.Lock()
        self._sock: Any = None
        self._reader: Any = None
        self._encoding = pool.connection_kwargs.get("encoding", "utf-8")
        self.timeout_s = timeout_s or max(float(pool.connection_kwargs.get("socket_timeout") or 0), DEFAULT_COMMAND_TIMEOUT_S)
        self.deadline = 0.0
        self._blocking = False  # waiting in a blocking command (BLMOVE)
        self._stopping = False  # set by stop_blocking(): blocking commands return None at once
        self._client_id: int | None = None  # CLIENT ID of the socket open now (asked once per socket)

    def client_id(self, key: Any = None) -> int:
        """This connection's CLIENT ID (for CLIENT UNBLOCK); one command after each (re)connect."""
        if self._client_id is None or self._sock is None:
            self._client_id = int(self.execute("CLIENT", "ID"))
        return self._client_id

    def execute(self, *args: Any, block_s: float = 0.0) -> Any:
        """Send one command and return its reply; ``block_s``: how long the
        command itself may block (BLMOVE), on top of the command timeout."""
        with self._lock:
            try:
                return self._roundtrip(args, block_s)
            except (RedisConnectionError, RedisTimeoutError, OSError):
                self._drop()
                return self._roundtrip(args, block_s)

    def _roundtrip(self, args: tuple[Any, ...], block_s: float) -> Any:
        if self._sock is None and not (block_s and self._stopping):
            self._open()
        if block_s and self._stopping:
            return None  # the worker is stopping: a claim finds nothing, without waiting
        sock, reader = self._sock, self._reader
        self.deadline = time.monotonic() + self.timeout_s + block_s
        self._blocking = block_s > 0
        try:
            packed = hiredis.pack_command(args)
            sent = sock.send(packed)  # one send is all a command takes, almost always
            if sent < len(packed):
                sock.sendall(packed[sent:])
            reply = reader.gets()
            while reply is False:
                data = sock.recv(_READ_SIZE)
                if not data:
                    raise RedisConnectionError("Connection closed by server (or aborted by the watchdog)")
                reader.feed(data)
                reply = reader.gets()
        except BaseException:
            self._drop()
            raise
        finally:
            self.deadline = 0.0
            self._blocking = False
        if isinstance(reply, Exception):
            raise reply  # an error reply: the connection is still in step
        return reply

    def _open(self) -> None:
        conn = self._conn
        try:
            conn.connect()  # handshake: AUTH / HELLO, SELECT, client name
        except RedisError:
            conn.disconnect()
            raise
        sock = conn._sock
        sock.settimeout(None)
        self._sock = sock
        # "replace": bytes that are not UTF-8 (a foreign binary payload) become
        # U+FFFD and then fail as bad JSON, instead of breaking the reply.
        self._reader = hiredis.Reader(replyError=parse_error, encoding=self._encoding, errors="replace")

    def _drop(self) -> None:
        self._sock = None
        self._client_id = None
        self._reader = None
        self._conn.disconnect()

    def overdue(self, now: float) -> bool:
        return self.deadline != 0.0 and now > self.deadline

    def abort(self) -> None:
        """Break a command that waits too long: its recv sees end-of-file."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the waiting command fails by itself

    def stop_blocking(self) -> None:
        """End a blocking command now and refuse new ones (they return None).

        The worker stops claiming this way instead of killing slot greenlets:
        a kill that lands in redis-py's connect would leak its socket."""
        self._stopping = True
        if self._blocking:
            self.abort()

    def close(self) -> None:
        with self._lock:
            self._drop()


def parse_error(message: str) -> Exception:
    """An error reply as redis-py's exception class (NoScriptError, BusyLoadingError, ...;
    a function Redis does not have as NoScriptError too)."""
    error: Exception = missing_function_as_noscript(BaseParser.parse_error(message))  # type: ignore[no-untyped-call]
    return error


#: Error replies after which a cluster command is sent again once the slot
#: map is refreshed: the slot moved (failover, resharding), or its master
#: changed role under a blocked BLMOVE.
_CLUSTER_RETRY = (MovedError, AskError, TryAgainError, ClusterDownError)
_CLUSTER_RETRY_PREFIXES = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "UNBLOCKED", "READONLY")
_CLUSTER_ATTEMPTS = 5


def _routing_key(args: tuple[Any, ...]) -> Any:
    """The key a command is routed by: FCALL's first key, else the first argument."""
    if str(args[0]).upper() == "FCALL":
        return args[3]
    return args[1]


class ClusterSlotConnection:
    """A slot's connections in Redis Cluster: one :class:`SlotConnection` per
    master, each command sent to the master of its key's hash slot (every
    command of a slot names keys of one queue, hence one slot). On a moved
    slot or a failed master the slot map is refreshed and the command sent
    again, so a failover costs a retry, not a run."""

    def __init__(self, cluster: Any, *, timeout_s: float | None = None, factory: Callable[..., Any] | None = None) -> None:
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._factory = factory or SlotConnection  # or MuxConnection: one shared connection per master
        self._by_node: dict[str, SlotConnection] = {}
        # hash slot -> connection, so that the hot path skips redis-py's routing
        # (wrappers, locks); dropped whenever the slot map is refreshed
        self._by_slot: dict[int, SlotConnection] = {}
        self._stopping = False

    def _for_key(self, key: Any) -> SlotConnection:
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        conn = self._by_slot.get(slot)
        if conn is None:
            node = self._cluster.nodes_manager.get_node_from_slot(slot)
            conn = self._by_node.get(node.name)
            if conn is None:
                conn = self._by_node[node.name] = self._factory(node.redis_connection, timeout_s=self._timeout_s)
                if self._stopping:
                    conn.stop_blocking()
            self._by_slot[slot] = conn
        return conn

    def execute(self, *args: Any, block_s: float = 0.0) -> Any:
        key = _routing_key(args)
        for attempt in range(_CLUSTER_ATTEMPTS):
            try:
                return self._for_key(key).execute(*args, block_s=block_s)
            except (RedisConnectionError, RedisTimeoutError, *_CLUSTER_RETRY) as exc:
                self._refresh(exc, attempt)
            except ResponseError as exc:
                if not str(exc).startswith(_CLUSTER_RETRY_PREFIXES):
                    raise
                self._refresh(exc, attempt)
        return self._for_key(key).execute(*args, block_s=block_s)

    def _refresh(self, exc: Exception, attempt: int) -> None:
        log.info("cluster: %s; refreshing the slot map", exc)
        self._by_slot.clear()
        gevent.sleep(min(0.05 * 2**attempt, 1.0))
        try:
            self._cluster.nodes_manager.initialize()
        except RedisError as refresh_error:  # the next attempt fails again and says why
            log.warning("cluster: slot map refresh failed (%s)", refresh_error)

    def run_script(self, script: LibraryFunction, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return self.execute(*script.command(keys, args))
        except NoScriptError:
            script.library.load(self._for_key(keys[0]))
            return self.execute(*script.command(keys, args))

    def client_id(self, key: Any) -> int:
        """The CLIENT ID of the connection to ``key``'s master."""
        return self._for_key(key).client_id()

    def overdue(self, now: float) -> bool:
        return any(conn.overdue(now) for conn in list(self._by_node.values()))

    def abort(self) -> None:
        for conn in list(self._by_node.values()):
            if conn.deadline:
                conn.abort()

    def stop_blocking(self) -> None:
        self._stopping = True
        for conn in list(self._by_node.values()):
            conn.stop_blocking()

    def close(self) -> None:
        for conn in list(self._by_node.values()):
            conn.close()


def unblock_clients(client: Any, blocked: Sequence[tuple[str, int]]) -> None:
    """CLIENT UNBLOCK each ``(key, client_id)`` (a connection blocked on ``key``) on a pool
    connection to the node that holds ``key`` (one round trip on a stand-alone Redis);
    an id gone meanwhile is no error."""
    if is_cluster(client):
        for key, client_id in blocked:
            client.client_unblock(client_id, target_nodes=client.get_node_from_key(key))
        return
    pipe = client.pipeline(transaction=False)
    for _, client_id in blocked:
        pipe.client_unblock(client_id)
    pipe.execute()


def slot_connection(client: Any) -> SlotConnection | ClusterSlotConnection:
    """A new dedicated connection for one slot of a worker on ``client``'s Redis."""
    return ClusterSlotConnection(client) if is_cluster(client) else SlotConnection(client)
