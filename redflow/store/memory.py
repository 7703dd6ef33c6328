"""What redflow does about a Redis that is full or may evict.

A Redis with any ``maxmemory-policy`` but ``noeviction`` may drop queue
entries, run hashes and leases when it reaches ``maxmemory``: runs vanish
without an error (measured: 23,596 of 25,000 runs evicted under
``allkeys-lru``, the producer never told). The ``volatile-*`` policies are
no better: leases and wake-up lists carry expiries. So the worker and
``create_client`` read the policy once and log an ERROR naming the fix
(a worker with ``refuse_evicting_redis`` refuses to start instead). A full
``noeviction`` Redis refuses writes with OOM; :func:`raise_when_full` turns
that into :class:`~redflow.core.errors.RedisFullError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis.exceptions import ConnectionError, OutOfMemoryError, ResponseError, TimeoutError

from redflow.core.errors import EvictingRedisError, RedisFullError
from redflow.store.connection import is_cluster

log = logging.getLogger("redflow.memory")

SAFE_POLICY = "noeviction"

_said: set[str] = set()  # each message once per process: clients are made often
_checked: set[str] = set()  # Redis servers create_client has checked in this process


def _once(level: int, message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.log(level, "%s", message)


def redis_target(redis: Any) -> str:
    """Which Redis a client talks to, fit to print (no password): ``host:port/db``."""
    if is_cluster(redis):
        return "Redis Cluster " + ",".join(sorted(node.name for node in redis.get_nodes()))
    kwargs = getattr(getattr(redis, "connection_pool", None), "connection_kwargs", {})
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def eviction_policy(redis: Any) -> str | None:
    """Redis's ``maxmemory-policy``, or None where CONFIG is not allowed (an ACL
    user without ``+config``, a managed service that renames CONFIG): said once."""
    try:
        reply = redis.config_get("maxmemory-policy")
    except ResponseError as exc:  # NOPERM or an unknown command: not ours to fix, only to mention
        _once(
            logging.WARNING,
            f"cannot read maxmemory-policy of {redis_target(redis)} ({exc}); make sure it is {SAFE_POLICY!r}: "
            "any other policy lets Redis delete queued runs when it is full",
        )
        return None
    if isinstance(reply, dict) and reply and "maxmemory-policy" not in reply:
        reply = next(iter(reply.values()))  # Redis Cluster: one reply per node
    policy = reply.get("maxmemory-policy") if isinstance(reply, dict) else None
    return str(policy) if policy else None


def check_eviction_policy(redis: Any, *, refuse: bool = False) -> str | None:
    """Log an ERROR when Redis may evict redflow's data (raise
    :class:`EvictingRedisError` with ``refuse``); returns the policy (None
    when it cannot be read)."""
    policy = eviction_policy(redis)
    if policy is None or policy == SAFE_POLICY:
        return policy
    message = (
        f"Redis {redis_target(redis)} has maxmemory-policy {policy!r}: when it is full it deletes keys, "
        f"so queued runs, run hashes and leases can vanish without an error. Set maxmemory-policy {SAFE_POLICY} "
        f"(CONFIG SET maxmemory-policy {SAFE_POLICY}, or in redis.conf / your provider's settings)"
    )
    if refuse:
        raise EvictingRedisError(message + "; refusing to start (refuse_evicting_redis)")
    _once(logging.ERROR, message)
    return policy


def check_eviction_policy_once(redis: Any) -> None:
    """:func:`check_eviction_policy` once per Redis per process (clients are
    made often); a Redis not reachable yet is checked by the next client."""
    target = redis_target(redis)
    if target in _checked:
        return
    try:
        check_eviction_policy(redis)
    except (ConnectionError, TimeoutError) as exc:
        log.debug("maxmemory-policy of %s not checked: %s", target, exc)
        return
    _checked.add(target)


@contextmanager
def raise_when_full(consequence: str = "nothing was enqueued") -> Iterator[None]:
    """Redis's OOM refusal inside the block becomes :class:`RedisFullError`
    (``consequence`` says what that means for the caller; the redis-py error
    is its ``__cause__``)."""
    try:
        yield
    except OutOfMemoryError as exc:
        raise RedisFullError(consequence) from exc
