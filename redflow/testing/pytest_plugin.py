"""pytest fixtures for suites that test their own redflow workflows.

Installed with redflow-gevent (a ``pytest11`` entry point), so the fixtures
are there without a ``conftest.py`` import:

- ``redflow_redis_server``: a private redis-server for the session
  (:class:`redflow.testing.RedisServer`, on a free loopback port);
- ``redflow_prefix``: a fresh key prefix per test, so tests never see each
  other's runs;
- ``redflow_client``: a client on that server and prefix;
- ``redflow_worker``: a factory, ``redflow_worker(registry, **options)``,
  that starts an in-process worker on that server and prefix; every worker
  it started is stopped when the test ends.

The worker needs gevent's monkey patching: run pytest as
``python -m gevent.monkey --module pytest``, or call
``gevent.monkey.patch_all()`` first thing in your ``conftest.py``.

This module imports nothing heavy at load time (pytest loads it in every
session of the environment, before your conftest has patched anything).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from redflow.client import RedflowClient
    from redflow.engine.worker import Worker
    from redflow.registry import Registry
    from redflow.testing import RedisServer

#: Quicker than production defaults, so that tests stop and recover fast.
WORKER_TEST_DEFAULTS = {"lease_ms": 1000, "reaper_interval_ms": 100, "blmove_timeout": 0.2}


@pytest.fixture(scope="session")
def redflow_redis_server() -> Iterator[RedisServer]:
    """A private redis-server for the whole session; a clear failure if it cannot start."""
    from redflow.testing import RedisServer, RedisServerError

    server = RedisServer()
    try:
        server.start()
    except RedisServerError as exc:
        server.cleanup()
        pytest.fail(f"redflow: cannot start a private redis-server: {exc}", pytrace=False)
    yield server
    server.cleanup()


@pytest.fixture
def redflow_prefix() -> str:
    """A key prefix of this test's own."""
    return f"redflow-test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redflow_client(redflow_redis_server: RedisServer, redflow_prefix: str) -> Iterator[RedflowClient]:
    """A client on the private server, under the test's prefix."""
    from redflow.client import create_client

    if not redflow_redis_server.ping():  # a test may have stopped it
        redflow_redis_server.start()
    client = create_client(redflow_redis_server.url, prefix=redflow_prefix)
    yield client
    client.close()


@pytest.fixture
def redflow_worker(redflow_redis_server: RedisServer, redflow_prefix: str) -> Iterator[Callable[..., Worker]]:
    """``redflow_worker(registry=None, **start_worker_options)`` -> a started worker, stopped after the test."""
    from redflow.engine.worker import start_worker

    workers: list[Worker] = []

    def start(registry: Registry | None = None, **options: Any) -> Worker:
        for name, value in WORKER_TEST_DEFAULTS.items():
            options.setdefault(name, value)
        options.setdefault("url", redflow_redis_server.url)
        worker = start_worker(registry, prefix=redflow_prefix, **options)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop(timeout=5)
