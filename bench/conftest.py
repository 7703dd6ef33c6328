"""The benchmark suite (``tox -e bench``): a private redis-server for the session.

Run under gevent (``python -m gevent.monkey --module pytest bench``), as
the worker needs; patching again here keeps a plain ``pytest bench`` right.
"""

from gevent import monkey

monkey.patch_all()

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from redflow.testing import RedisServer  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    """``--benchmark-json bench/results/x.json`` works on a fresh checkout (results/ is not committed)."""
    path = config.getoption("benchmark_json", None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """One private server for every benchmark; each uses a fresh key prefix."""
    with RedisServer() as server:
        yield server.url
