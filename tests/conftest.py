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

from redflow import Registry, create_client, start_worker  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

from helpers import started  # noqa: E402


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with started(RedisServer(), "a private redis-server") as server:
        yield server


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


@pytest.fixture
def start(redis_url: str, prefix: str, registry: Registry):
    """Start in-process workers on the test's prefix (fast lease and reaper); all stopped at teardown."""
    workers = []

    def _start(reg: Registry | None = None, **options):
        options.setdefault("lease_ms", 1000)
        options.setdefault("reaper_interval_ms", 100)
        options.setdefault("blmove_timeout", 0.2)
        worker = start_worker(reg if reg is not None else registry, url=options.pop("url", redis_url), prefix=prefix, **options)
        workers.append(worker)
        return worker

    yield _start
    for worker in workers:
        worker.stop(timeout=5)


@pytest.fixture
def cli_client(redis_url: str, prefix: str):
    """A client knowing the workflows of tests/apps/cli_app.py (run by worker subprocesses)."""
    from tests.apps.cli_app import registry as app_registry

    c = create_client(redis_url, prefix=prefix, registry=app_registry)
    yield c
    c.close()
