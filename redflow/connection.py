"""Redis clients and the per-slot connections of a worker.

The one place environment variables are read (``REDIS_URL``,
``REDFLOW_PREFIX``). Every client decodes replies to ``str`` (hiredis does
it in C), so the rest of redflow never sees bytes.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .keys import DEFAULT_PREFIX

DEFAULT_URL = "redis://127.0.0.1:6379/0"


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

    Commands go straight to the connection: send, read, no pool checkout,
    no response callbacks, about half the CPU of ``Redis.execute_command``
    on the hot path. It speaks enough of the redis-py client interface
    (``evalsha``, ``script_load``) for registered scripts to run on it.

    A command that fails on a broken connection is sent once more on a
    fresh one; every command redflow sends on a slot is safe to repeat
    (the scripts are idempotent for the same lease token). Any other
    exception, including an interrupt thrown into the greenlet mid-reply,
    drops the connection so that no half-read reply is ever reused.
    """

    __slots__ = ("_conn", "_lock")

    def __init__(self, source: redis.Redis) -> None:
        pool = source.connection_pool
        self._conn = pool.connection_class(**pool.connection_kwargs)
        self._lock = threading.Lock()

    def execute(self, *args: Any) -> Any:
        with self._lock:
            try:
                return self._roundtrip(args)
            except (RedisConnectionError, RedisTimeoutError):
                self._conn.disconnect()
                return self._roundtrip(args)

    def _roundtrip(self, args: tuple[Any, ...]) -> Any:
        conn = self._conn
        try:
            conn.send_packed_command(conn.pack_command(*args), check_health=False)
            return conn.read_response()
        except redis.ResponseError:
            raise  # an error reply: the connection is still in step
        except BaseException:
            conn.disconnect()
            raise

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute("EVALSHA", sha, numkeys, *keys_and_args)

    def script_load(self, script: str | bytes) -> str:
        return self.execute("SCRIPT", "LOAD", script)

    def close(self) -> None:
        self._conn.disconnect()
