"""Test harness: a private redis-server per test session, a fresh prefix per test.

Nothing here touches a Redis that happens to be running already: every
server is started by the tests on a free loopback port.
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import gevent  # noqa: E402
import pytest  # noqa: E402
import redis  # noqa: E402

from redflow import Registry, create_client  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

# The chaos report is gathered where the session ends (the pytest-xdist controller, or the only process).
pytest_plugins = ["tests.chaos.report"]


def _keep_the_hub_alive_in_an_xdist_worker() -> None:
    """A pytest-xdist worker (scripts/test runs several) waits for its next test on an Event
    that execnet's reader, a native thread started before the patching above, sets. gevent
    wakes a hub from another thread only while its loop runs, and an idle loop exits
    (LoopExit: "This operation would block forever"): a started async watcher keeps it running
    at no cost (it never fires)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        watcher = gevent.get_hub().loop.async_()
        watcher.start(lambda: None)
        _KEEPALIVE.append(watcher)


_KEEPALIVE: list[object] = []
_keep_the_hub_alive_in_an_xdist_worker()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order and group the tests for scripts/test's parallel workers (pytest-xdist, --dist loadgroup).

    The tests marked ``slow`` come first: the long ones start first and the workers end together
    (a long test picked up last would run alone at the end). Every test on the session's Redis
    Cluster (the ``redis_cluster`` fixture, tests/cluster/) is in one group: one worker starts that
    cluster of six servers, not each worker its own."""
    for item in items:
        if "redis_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("redis-cluster"))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the rest keep their order


# The shipped pytest plugin (redflow.testing.pytest_plugin) starts the
# private server and makes prefixes and workers; these names are the suite's.


@pytest.fixture(scope="session")
def redis_server(redflow_redis_server: RedisServer) -> RedisServer:
    return redflow_redis_server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    if not redis_server.ping():  # a test may have stopped it
        redis_server.start()
    return redis_server.url


@pytest.fixture
def prefix(redflow_prefix: str) -> str:
    return redflow_prefix


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
def start(redflow_worker, redis_url: str, registry: Registry):
    """Start in-process workers on the test's prefix (fast lease and reaper; the
    test's registry by default); all stopped at teardown."""

    def _start(reg: Registry | None = None, **options):
        options.setdefault("url", redis_url)  # the cluster suite's URL where it overrides redis_url
        return redflow_worker(reg if reg is not None else registry, **options)

    return _start


@pytest.fixture
def cli_client(redis_url: str, prefix: str):
    """A client knowing the workflows of tests/apps/cli_app.py (run by worker subprocesses)."""
    from tests.apps.cli_app import registry as app_registry

    c = create_client(redis_url, prefix=prefix, registry=app_registry)
    yield c
    c.close()


@pytest.fixture
def cli(redis_url, prefix, capsys):
    """Run one ``redflow-gevent`` sub-command in this process: (exit code, stdout, stderr)."""
    from redflow.ops.cli import build_parser

    def run(*argv):
        args = build_parser().parse_args([*argv, "--redis-url", redis_url, "--prefix", prefix])
        code = args.func(args)
        out, err = capsys.readouterr()
        return code, out, err

    return run
