"""A real Redis Cluster (3 masters, 3 replicas) on loopback ports, once per test session.

Tests in this folder get ``redis_url`` = a ``redis+cluster://`` URL, so the
client, worker and fixtures of tests/conftest.py all run on the cluster.
"""

from collections.abc import Iterator

import pytest
from helpers import started
from redis.cluster import RedisCluster

from redflow.testing.cluster import RedisClusterHarness


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterHarness]:
    with started(RedisClusterHarness(), "a private Redis Cluster") as harness:
        yield harness


@pytest.fixture
def redis_url(redis_cluster: RedisClusterHarness) -> str:
    return redis_cluster.url


@pytest.fixture
def r(redis_cluster: RedisClusterHarness) -> Iterator[RedisCluster]:
    """A raw decoding RedisCluster client (to look behind the API)."""
    client = RedisCluster(host="127.0.0.1", port=redis_cluster.servers[0].port, decode_responses=True)
    yield client
    client.close()
