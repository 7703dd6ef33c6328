"""Redis clients: single server, Redis Cluster and Sentinel, from URLs.

The one place environment variables are read (``REDIS_URL``,
``REDFLOW_PREFIX``, ``REDFLOW_APP``, ``REDFLOW_RUN_RETENTION_DAYS``,
``REDFLOW_REFUSE_EVICTING_REDIS``). Every client decodes replies to ``str``
(hiredis does it in C), so the rest of redflow never sees bytes. URLs:

- ``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS), ``unix:///path.sock``
- ``redis+cluster://[user:password@]host:port[,host:port...]`` (``rediss+cluster://`` for TLS):
  Redis Cluster through redis-py's ``RedisCluster``
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``: the
  primary that Sentinel names for ``service`` (``rediss+sentinel://`` for TLS)
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlencode, urlsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel, SentinelConnectionPool

from redflow.core.errors import RedflowError
from redflow.core.interop import Interop, interop
from redflow.core.keys import DEFAULT_PREFIX
from redflow.core.retention import DEFAULT_RETENTION, Retention, retention_from_days

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DASHBOARD_TOKEN_ENV = "REDFLOW_DASHBOARD_TOKEN"
RETENTION_DAYS_ENV = "REDFLOW_RUN_RETENTION_DAYS"
REFUSE_EVICTING_ENV = "REDFLOW_REFUSE_EVICTING_REDIS"
# Pooled connections per client. When all are busy, a greenlet waits for one
# (up to POOL_WAIT_S) instead of failing with "Too many connections": a web
# server's thousand greenlets share a bounded pool.
DEFAULT_MAX_CONNECTIONS = 128
POOL_WAIT_S = 30.0


def resolve_app(app: str | None = None) -> str | None:
    """An explicit app name wins; else ``REDFLOW_APP`` if not blank (as the asyncio package reads it); else None."""
    if app is not None:
        return app
    return os.environ.get("REDFLOW_APP", "").strip() or None


def resolve_interop(app: str | None = None, blob_threshold: int | None = None, compat: str | None = None) -> Interop:
    """The interop settings of a client or worker (``core/interop.py``), its app name from ``REDFLOW_APP`` when not given."""
    return interop(resolve_app(app), blob_threshold, compat)


def resolve_prefix(prefix: str | None = None) -> str:
    """An explicit prefix wins; else ``REDFLOW_PREFIX`` if non-empty; else ``redflow:v1``."""
    if prefix:
        return prefix
    return os.environ.get("REDFLOW_PREFIX") or DEFAULT_PREFIX


def resolve_url(url: str | None = None) -> str:
    """An explicit URL wins; else ``REDIS_URL``; else the local default."""
    return url or os.environ.get("REDIS_URL") or DEFAULT_URL


def resolve_dashboard_token(flag: str | None = None) -> str | None:
    """``--token`` wins, else ``REDFLOW_DASHBOARD_TOKEN``; ``None`` means dashboard actions are off."""
    return flag if flag is not None else os.environ.get(DASHBOARD_TOKEN_ENV) or None


def resolve_default_retention(retention: Retention | None = None) -> Retention:
    """The retention of runs of workflows that stored none (synced by other
    clients, or never synced): an explicit one wins, else
    ``REDFLOW_RUN_RETENTION_DAYS`` (days; ``forever`` keeps them), else the default."""
    if retention is not None:
        return retention
    text = os.environ.get(RETENTION_DAYS_ENV, "").strip()
    return retention_from_days(text) if text else DEFAULT_RETENTION


def resolve_refuse_evicting(flag: bool | None = None) -> bool:
    """Whether a worker refuses a Redis that may evict: an explicit flag wins, else
    ``REDFLOW_REFUSE_EVICTING_REDIS`` (``1``, ``true``, ``yes``, ``on``)."""
    if flag is not None:
        return flag
    return os.environ.get(REFUSE_EVICTING_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def redacted_url(url: str) -> str:
    """``url`` fit to print: the password of the userinfo and every ``*password*``
    query parameter (``?password=``, ``?sentinel_password=``) shown as ``***``.

    Every message, log line and record that names a Redis goes through this.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable Redis URL>"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    # A lone userinfo (``redis://secret@host``) may be a password too: hidden.
    netloc = (f"{user}:***@{hosts}" if colon and user else f"***@{hosts}") if at else parts.netloc
    query = parts.query
    if "password" in query.lower():
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if "password" in k.lower() else v) for k, v in pairs], safe="*")
    return f"{parts.scheme}://{netloc}{parts.path}{'?' + query if query else ''}{'#' + parts.fragment if parts.fragment else ''}"


def describe_redis(client: Any) -> str:
    """The URL of the Redis ``client`` talks to, fit to print (:func:`redacted_url`),
    rebuilt from its connection settings: the same for a client made from a URL
    or passed in (``create_client(redis=...)``). For messages, never to connect."""
    if is_cluster(client):
        nodes = ",".join(f"{node.host}:{node.port}" for node in client.get_nodes()[:3])
        return f"redis+cluster://{nodes}"
    pool = getattr(client, "connection_pool", None)
    kwargs: dict[str, Any] = getattr(pool, "connection_kwargs", {})
    password, user = kwargs.get("password"), kwargs.get("username") or ""
    userinfo = f"{quote(user)}:{'x' if password else ''}@" if password or user else ""
    if isinstance(pool, SentinelConnectionPool):
        sentinels = ",".join(_host_port(sentinel.connection_pool.connection_kwargs) for sentinel in pool.sentinel_manager.sentinels)
        return redacted_url(f"redis+sentinel://{userinfo}{sentinels}/{pool.service_name}/{kwargs.get('db', 0)}")
    if "path" in kwargs:
        return redacted_url(f"unix://{userinfo}{kwargs['path']}?db={kwargs.get('db', 0)}")
    scheme = "rediss" if issubclass(getattr(pool, "connection_class", object), redis.SSLConnection) else "redis"
    return redacted_url(f"{scheme}://{userinfo}{_host_port(kwargs)}/{kwargs.get('db', 0)}")


def _host_port(kwargs: dict[str, Any]) -> str:
    host = str(kwargs.get("host", "localhost"))
    return f"[{host}]:{kwargs.get('port', 6379)}" if ":" in host else f"{host}:{kwargs.get('port', 6379)}"


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def close_redis(client: Any) -> None:
    """Close a client made by :func:`create_redis`, with the Sentinel clients behind it."""
    pool = getattr(client, "connection_pool", None)
    client.close()
    if isinstance(pool, SentinelConnectionPool):
        for sentinel in pool.sentinel_manager.sentinels:
            sentinel.close()


def create_redis(url: str | None = None, *, redis_client: Any = None, max_connections: int | None = None, cluster: bool = False) -> Any:
    """A redis-py client (``Redis`` or ``RedisCluster``) that decodes replies
    (bytes that are not UTF-8 become U+FFFD, then fail as bad JSON).

    ``redis_client`` is used as is when it already decodes; otherwise a
    client sharing its connection settings (host, auth, TLS) but decoding is
    built, because redflow reads ``str`` everywhere.
    """
    if redis_client is not None:
        return _decoding(redis_client)
    url = resolve_url(url)
    scheme = urlsplit(url).scheme
    if scheme.endswith("+cluster") or cluster:
        return _cluster_from_url(url, max_connections)
    if scheme.endswith("+sentinel"):
        return _sentinel_from_url(url, max_connections)
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections or DEFAULT_MAX_CONNECTIONS,
        timeout=POOL_WAIT_S,
        decode_responses=True,
        encoding_errors="replace",
    )
    return redis.Redis.from_pool(pool)


def _decoding(client: Any) -> Any:
    if client.get_encoder().decode_responses:
        return client
    if is_cluster(client):
        raise RedflowError("pass a RedisCluster created with decode_responses=True")
    pool = client.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        raise RedflowError("pass a Sentinel master_for(...) client created with decode_responses=True")
    kwargs = dict(pool.connection_kwargs, decode_responses=True)
    decoding_pool = pool.__class__(connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs)
    # from_pool: closing the decoding client disconnects this pool (the caller's stays theirs).
    return redis.Redis.from_pool(decoding_pool)


def _hosts(netloc: str) -> list[tuple[str, int]]:
    hosts = []
    for part in netloc.rpartition("@")[2].split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise RedflowError(f"bad host:port {part!r} in a Redis URL")
        hosts.append((host.strip("[]"), int(port)))
    return hosts


def _auth(netloc: str) -> dict[str, Any]:
    userinfo = netloc.rpartition("@")[0]
    if not userinfo:
        return {}
    user, _, password = userinfo.partition(":")
    return {"username": unquote(user) or None, "password": unquote(password) or None}


def _cluster_from_url(url: str, max_connections: int | None) -> RedisCluster:
    parts = urlsplit(url)
    tls = parts.scheme.startswith("rediss")
    kwargs: dict[str, Any] = dict(_auth(parts.netloc), decode_responses=True, encoding_errors="replace")
    (host, port), *others = _hosts(parts.netloc)
    scheme = "rediss" if tls else "redis"
    # A node URL (not only startup_nodes) makes redis-py build each node's pool from connection_pool_class.
    return RedisCluster(
        url=f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}",
        startup_nodes=[ClusterNode(h, p) for h, p in others],  # type: ignore[no-untyped-call]
        connection_pool_class=redis.BlockingConnectionPool,
        max_connections=max_connections or DEFAULT_MAX_CONNECTIONS,
        **kwargs,
    )


def _sentinel_from_url(url: str, max_connections: int | None) -> redis.Redis:
    parts = urlsplit(url)
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise RedflowError(f"a Sentinel URL names the service: redis+sentinel://host:port/<service>[/db] ({redacted_url(url)})")
    options = parse_qs(parts.query)
    auth = _auth(parts.netloc)
    sentinel_kwargs = {"password": options["sentinel_password"][0]} if "sentinel_password" in options else {}
    sentinel = Sentinel(_hosts(parts.netloc), sentinel_kwargs=sentinel_kwargs, socket_timeout=5.0)
    kwargs: dict[str, Any] = dict(auth, decode_responses=True, encoding_errors="replace", db=int(path[1]) if len(path) > 1 else 0)
    if parts.scheme.startswith("rediss"):
        kwargs["ssl"] = True
    kwargs.update(max_connections=max_connections or DEFAULT_MAX_CONNECTIONS, timeout=POOL_WAIT_S)
    master: redis.Redis = sentinel.master_for(path[0], connection_pool_class=_BlockingSentinelPool, **kwargs)
    return master


class _BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """Sentinel's primary tracking with a pool that waits for a free connection."""
