"""Fixtures of the chaos suite.

Each test gets its own engine redis-server (so killing, restarting or
dropping its connections touches nobody else), started with keyspace
notifications for :class:`~tests.chaos.kit.FinalizeWitness`. One side
redis-server per session holds the executions the workflows count; it is
never faulted. Worker subprocesses are ``redflow-gevent worker`` processes
(tests/helpers.py ``WorkerProcess``) running ``tests/chaos/apps``.

Timings go to the "redflow chaos report" section at the end of the pytest
run (and to the file named by ``REDFLOW_CHAOS_REPORT``, if set;
tests/chaos/report.py): the machine is shared, so the suite reports times
and never asserts on speed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

from redflow import create_client
from redflow.testing import RedisServer
from tests.chaos.apps.bad_app import registry as bad_registry
from tests.chaos.apps.crash_app import registry as crash_registry
from tests.chaos.apps.side import SIDE_URL_ENV
from tests.chaos.harness import NOTIFY_ARGS, Bench, Workers, start_server
from tests.chaos.kit import FinalizeWitness, SideCounts, TerminalWatch, watched
from tests.chaos.report import PROPERTY as REPORT_PROPERTY


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "engine(persistent=False, extra_args=()): options of the test's private engine redis-server")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)  # teardown shows worker logs when the test failed
    return report


def call_failed(request: pytest.FixtureRequest) -> bool:
    rep = getattr(request.node, "rep_call", None)
    return rep is None or rep.failed


@pytest.fixture
def report(request: pytest.FixtureRequest):
    """``report("...")``: a line for the chaos report, tagged with the test's name."""

    def add(line: str) -> None:
        request.node.user_properties.append((REPORT_PROPERTY, f"{request.node.name}: {line}"))
        print(line)

    return add


# -- the side channel ---------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def side_server() -> Iterator[RedisServer]:
    """The redis-server the workflows count their executions in; worker subprocesses find it in the environment."""
    server = start_server()
    previous = os.environ.get(SIDE_URL_ENV)
    os.environ[SIDE_URL_ENV] = server.url
    yield server
    if previous is None:
        os.environ.pop(SIDE_URL_ENV, None)
    else:
        os.environ[SIDE_URL_ENV] = previous
    server.cleanup()


@pytest.fixture
def side(side_server: RedisServer, prefix: str) -> Iterator[SideCounts]:
    client = redis.Redis.from_url(side_server.url, decode_responses=True)
    yield SideCounts(client, prefix)
    client.close()


# -- the engine's Redis --------------------------------------------------------------


@pytest.fixture
def engine_factory() -> Iterator:
    """``engine_factory(persistent=..., extra_args=...)``: more private engine servers, all cleaned up."""
    servers: list[RedisServer] = []

    def make(*, persistent: bool = False, extra_args: tuple[str, ...] = ()) -> RedisServer:
        server = start_server(persistent=persistent, extra_args=[*NOTIFY_ARGS, *extra_args])
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.cleanup()


@pytest.fixture
def engine(request: pytest.FixtureRequest, engine_factory) -> RedisServer:
    """The test's engine redis-server; ``@pytest.mark.engine(persistent=True)`` for AOF."""
    marker = request.node.get_closest_marker("engine")
    return engine_factory(**(marker.kwargs if marker else {}))


@pytest.fixture
def er(engine: RedisServer) -> Iterator[redis.Redis]:
    """A raw decoding client on the engine's Redis, to look behind the API."""
    client = redis.Redis.from_url(engine.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def chaos_client(engine: RedisServer, prefix: str):
    client = watched(create_client(engine.url, prefix=prefix, registry=crash_registry))
    yield client
    client.close()


@pytest.fixture
def workers(request: pytest.FixtureRequest, prefix: str) -> Iterator[Workers]:
    """``workers.spawn(url, ...)`` starts worker subprocesses; all are killed at teardown."""
    pool = Workers(prefix)
    yield pool
    pool.close(show_logs=call_failed(request))


@pytest.fixture
def witness(engine: RedisServer, chaos_client) -> Iterator[FinalizeWitness]:
    watcher = FinalizeWitness(engine.url, chaos_client.keys)
    yield watcher
    watcher.stop()


@pytest.fixture
def terminal_watch(er: redis.Redis, chaos_client) -> Iterator[TerminalWatch]:
    watch = TerminalWatch(er, chaos_client.keys)
    yield watch
    watch.stop()


# -- the bad-input bench: one engine Redis and one worker for a whole module ------------------


@pytest.fixture(scope="module")
def shared_bench(side_server: RedisServer) -> Iterator[Bench]:
    prefix = f"rfbad:{uuid.uuid4().hex[:12]}"
    server = start_server(extra_args=NOTIFY_ARGS)
    pool = Workers(prefix)
    client = create_client(server.url, prefix=prefix, registry=bad_registry)
    r = redis.Redis.from_url(server.url, decode_responses=True)
    side_client = redis.Redis.from_url(side_server.url, decode_responses=True)
    try:
        worker = pool.spawn(server.url, app="bad_app", concurrency=8)
        yield Bench(server.url, prefix, client, r, SideCounts(side_client, prefix), worker)
    finally:
        pool.close(show_logs=False)
        for c in (client, r, side_client):
            c.close()
        server.cleanup()


@pytest.fixture
def bench(request: pytest.FixtureRequest, shared_bench: Bench) -> Iterator[Bench]:
    """The module's bench; a failing test shows the shared worker's last log lines."""
    yield shared_bench
    if call_failed(request):
        print("--- the module's worker, last lines ---\n" + "\n".join(shared_bench.worker.output().splitlines()[-40:]))
