"""Test harness: a private redis-server per test session, a fresh prefix per test.

Nothing here touches a Redis that happens to be running already: every
server is started by the tests on a free loopback port.
"""

from gevent import monkey

monkey.patch_all()

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
import redis  # noqa: E402
from gevent.event import Event  # noqa: E402
from helpers import wait_until  # noqa: E402

from redflow import Registry, create_client, define_workflow  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

# scripts/test runs the tests in parallel processes (tests/parallel.py); the chaos report is
# gathered where the session ends (the pytest-xdist controller, or the only process).
pytest_plugins = ["tests.parallel", "tests.chaos.report"]


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
    """Run one ``redflow-gevent`` sub-command in this process: (exit code, stdout, stderr);
    a command line argparse refuses gives its exit code (2) too."""
    from redflow.ops.cli import build_parser

    def run(*argv):
        try:
            args = build_parser().parse_args([*argv, "--redis-url", redis_url, "--prefix", prefix])
            code = args.func(args)
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


# tests/django_project/ is a Django project with tests of its own, which need
# Python 3.12+ and Django 6: tests/test_django.py runs them in .venv-django.
collect_ignore = ["django_project"]


@pytest.fixture
def held(start, client, registry):
    """A running run that streamed "one" and waits until ``go`` is set, then streams
    "two" and returns "done": (handle, go). For the stream tests (readers, live ones too; the interop driver)."""
    go = Event()

    @define_workflow("held", registry=registry)
    def held(ctx):
        ctx.stream("one")
        go.wait(30)
        ctx.stream("two")
        return "done"

    start()
    handle = client.run("held", None)
    wait_until(lambda: len(client.read_stream(handle.id)) == 1)
    yield handle, go
    go.set()
