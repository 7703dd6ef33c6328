"""Test harness: a private redis-server per test session, a fresh prefix per test.

Nothing here touches a Redis that happens to be running already: every
server is started by the tests on a free loopback port.
"""

from gevent import monkey

monkey.patch_all()

import uuid  # noqa: E402
from typing import Iterator  # noqa: E402

import pytest  # noqa: E402
import redis  # noqa: E402

from redflow import Registry, create_client  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        server.start()
    except Exception as exc:  # a clear failure, never a silent skip
        server.cleanup()
        pytest.fail(f"cannot start a private redis-server: {exc}", pytrace=False)
    yield server
    server.cleanup()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    if not redis_server.ping():  # a test may have stopped it
        redis_server.start()
    return redis_server.url


@pytest.fixture
def prefix() -> str:
    return f"rftest:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A raw decoding redis-py client on the private server (to look behind the API)."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def registry() -> Registry:
    return Registry()


@pytest.fixture
def client(redis_url: str, prefix: str, registry: Registry):
    c = create_client(redis_url, prefix=prefix, registry=registry)
    yield c
    c.close()


@pytest.fixture
def redis_servers() -> Iterator[list[RedisServer]]:
    """Start extra servers with ``redis_servers.append(RedisServer(...).start())``; all are cleaned up."""
    servers: list[RedisServer] = []
    yield servers
    for server in servers:
        server.cleanup()
