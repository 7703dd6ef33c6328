"""How scripts/test runs the suite in parallel: pytest-xdist workers (``-n``, ``--dist loadgroup``).

Each worker is a pytest session of its own, with its own private redis-server
(tests/conftest.py), so tests need no change to run side by side. A plugin of
tests/conftest.py, loaded in the workers and in the controller.
"""

from __future__ import annotations

import os

import gevent
import pytest


def _keep_the_hub_alive_in_an_xdist_worker() -> None:
    """A pytest-xdist worker waits for its next test on an Event that execnet's reader, a native
    thread started before tests/conftest.py's monkey patching, sets. gevent
    wakes a hub from another thread only while its loop runs, and an idle loop exits
    (LoopExit: "This operation would block forever"): a started async watcher keeps it running
    at no cost (it never fires)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        watcher = gevent.get_hub().loop.async_()
        watcher.start(lambda: None)
        _KEEPALIVE.append(watcher)


_KEEPALIVE: list[object] = []
_keep_the_hub_alive_in_an_xdist_worker()


#: pytest-xdist groups (--dist loadgroup): the tests of a group run one after another in one worker.
GROUPS = {"heavy": "heavy", "redis_cluster": "redis-cluster"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group and order the tests for scripts/test's parallel workers (pytest-xdist, --dist loadgroup).

    The tests marked ``heavy`` (a core or more busy for seconds) form one group: they run one at
    a time, so that they never starve each other's leases and timers. The tests on the session's
    Redis Cluster (the ``redis_cluster`` fixture, tests/cluster/) form another: one worker starts
    that cluster of six servers, not every worker its own (a heavy test on the cluster goes with
    the heavy ones, and their process starts a cluster too). xdist hands out the largest groups
    first; the tests marked ``slow`` come next, so that no long test starts last and runs alone
    at the end."""
    for item in items:
        if item.get_closest_marker("heavy"):
            item.add_marker(pytest.mark.xdist_group(GROUPS["heavy"]))
        elif "redis_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(GROUPS["redis_cluster"]))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, in its controller
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Stop when pytest-xdist lost the groups (pytest 9.2's node ids, pytest-xdist#1386: setup.py
    pins pytest below it): the heavy tests would run side by side, slower and flakier, silently."""
    if node.config.getoption("dist") == "loadgroup" and any(i.startswith("tests/cluster/") for i in ids):
        if not any(i.endswith("@" + GROUPS["redis_cluster"]) for i in ids):
            pytest.exit("pytest-xdist lost the xdist_group of the tests/cluster tests (--dist loadgroup): see setup.py's pin of pytest", 3)
