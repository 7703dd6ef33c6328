"""Redis clients and the per-slot connections of a worker.

The one place environment variables are read (``REDIS_URL``,
``REDFLOW_PREFIX``). Every client decodes replies to ``str`` (hiredis does
it in C), so the rest of redflow never sees bytes.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Sequence

import hiredis
import redis
from redis._parsers.base import BaseParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .keys import DEFAULT_PREFIX

DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: A slot command that has no reply after this long (plus its own blocking
#: time) is aborted by the watchdog and retried on a new connection.
DEFAULT_COMMAND_TIMEOUT_S = 10.0
_READ_SIZE = 65536


def resolve_prefix(prefix: str | None = None) -> str:
    """An explicit prefix wins; else ``REDFLOW_PREFIX`` if non-empty; else ``redflow:v1``."""
    if prefix:
        return prefix
    return os.environ.get("REDFLOW_PREFIX") or DEFAULT_PREFIX


def resolve_url(url: str | None = None) -> str:
    """An explicit URL wins; else ``REDIS_URL``; else the local default."""
    return url or os.environ.get("REDIS_URL") or DEFAULT_URL


def create_redis(url: str | None = None, *, redis_client: Any = None, max_connections: int | None = None) -> redis.Redis:
    """A redis-py client that decodes replies.

    ``redis_client`` is used as is when it already decodes; otherwise a
    client sharing its connection settings (host, auth, TLS) but decoding is
    built, because redflow reads ``str`` everywhere.
    """
    if redis_client is not None:
        if redis_client.get_encoder().decode_responses:
            return redis_client
        pool = redis_client.connection_pool
        kwargs = dict(pool.connection_kwargs, decode_responses=True)
        decoding_pool = pool.__class__(connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs)
        return redis.Redis(connection_pool=decoding_pool)
    return redis.Redis.from_url(resolve_url(url), decode_responses=True, max_connections=max_connections)


class SlotConnection:
    """One dedicated connection (not taken from a shared pool) for one worker slot.

    redis-py's ``Connection`` opens it (so URL options, AUTH/ACL users, TLS
    and the database all apply); after that, commands go straight to its
    socket through a private hiredis reader: no pool checkout, no response
    callbacks and no per-call socket timer, about half the CPU of
    ``Redis.execute_command`` on the hot path. Instead of a socket timeout,
    each command sets ``deadline`` and the worker's watchdog aborts a
    connection that is overdue (a Redis that stopped answering).

    It speaks enough of the redis-py client interface (``evalsha``,
    ``script_load``) for registered scripts to run on it. A command that
    fails on a broken connection is sent once more on a fresh one; every
    command redflow sends on a slot is safe to repeat (the scripts are
    idempotent for the same lease token). Any other exception, including
    an interrupt thrown into the greenlet mid-reply, drops the connection so
    that no half-read reply is ever reused.
    """

    __slots__ = ("_conn", "_lock", "_sock", "_reader", "_encoding", "timeout_s", "deadline")

    def __init__(self, source: redis.Redis, *, timeout_s: float | None = None) -> None:
        pool = source.connection_pool
        self._conn = pool.connection_class(**pool.connection_kwargs)
        self._lock = threading.Lock()
        self._sock: Any = None
        self._reader: Any = None
        self._encoding = pool.connection_kwargs.get("encoding", "utf-8")
        self.timeout_s = timeout_s or max(float(pool.connection_kwargs.get("socket_timeout") or 0), DEFAULT_COMMAND_TIMEOUT_S)
        self.deadline = 0.0

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
        if self._sock is None:
            self._open()
        sock, reader = self._sock, self._reader
        self.deadline = time.monotonic() + self.timeout_s + block_s
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
        self._reader = hiredis.Reader(replyError=_parse_error, encoding=self._encoding)

    def _drop(self) -> None:
        self._sock = None
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

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute("EVALSHA", sha, numkeys, *keys_and_args)

    def run_script(self, script: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run a registered script (a redis-py ``Script``) by its SHA, loading it on NOSCRIPT."""
        try:
            return self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            script.sha = self.script_load(script.script)
            return self.execute("EVALSHA", script.sha, len(keys), *keys, *args)

    def script_load(self, script: str | bytes) -> str:
        return self.execute("SCRIPT", "LOAD", script)

    def close(self) -> None:
        with self._lock:
            self._drop()


def _parse_error(message: str) -> Exception:
    """An error reply as redis-py's exception class (NoScriptError, BusyLoadingError, ...)."""
    return BaseParser.parse_error(message)
