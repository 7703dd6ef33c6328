"""A worker's start-up: errors a user can act on (one line, exit status 2, no
traceback, no password), and a Redis that is down, full or not there yet
waited for with backoff instead of a crash."""

import logging
import signal
import subprocess
import sys

import pytest
import redis
import redis.exceptions as rex
from helpers import CLI, ROOT, WorkerProcess, wait_until

from redflow import RedflowError, create_client
from redflow.engine import startup
from redflow.ops.cli import parse_args
from redflow.testing import RedisServer, free_port
from tests.apps.cli_app import registry as cli_registry


def start_worker_command(*argv):
    """Run ``redflow-gevent worker ARGV`` in this process up to its start-up error; its exit status."""
    args = parse_args(["worker", *argv])
    with pytest.raises(SystemExit) as exited:
        args.func(args)
    return exited.value.code


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ("no_such_module_here", "-A no_such_module_here: no module named 'no_such_module_here'"),
        ("app.py", "-A app.py: no module named 'app'"),  # a file name; the hint follows
        ("tests/apps/cli_app.py", "-A takes a module name, not a file: try -A tests.apps.cli_app"),
        ("app.py:registry", "-A takes a module name, not a file: try -A app:registry"),
        ("tests.apps.cli_app:nothing", "-A tests.apps.cli_app:nothing: tests.apps.cli_app.nothing is missing"),
        ("tests.apps.cli_app:gevent", "tests.apps.cli_app.gevent is not a redflow Registry"),
        ("json", "-A json defines no workflows"),
    ],
)
def test_a_bad_app_is_one_clear_error_and_exit_status_2(app, message, caplog):
    caplog.set_level(logging.ERROR, logger="redflow.cli")
    assert start_worker_command("-A", app) == 2
    assert [r.levelname for r in caplog.records] == ["ERROR"] and message in caplog.records[0].getMessage()
    if app.startswith("app.py"):
        assert "-A takes a module name, not a file: try -A app" in caplog.records[0].getMessage()


def test_an_app_that_imports_something_missing_keeps_its_traceback(tmp_path, monkeypatch):
    """Only a missing -A module is ours to explain; the app's own import error points into its code."""
    (tmp_path / "needs_a_dependency.py").write_text("import not_installed_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    args = parse_args(["worker", "-A", "needs_a_dependency"])
    with pytest.raises(ModuleNotFoundError) as raised:
        args.func(args)
    assert raised.value.name == "not_installed_dependency_xyz"


def run_worker_command(*argv, env=None, timeout=60):
    return subprocess.run([CLI, "worker", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def assert_one_clean_error(output, *needles):
    errors = [line for line in output.splitlines() if " ERROR " in line]
    assert len(errors) == 1, output
    assert "Traceback" not in output and all(needle in errors[0] for needle in needles), output


def test_a_worker_without_workflows_exits_with_an_error_instead_of_idling():
    done = run_worker_command("--redis-url", f"redis://127.0.0.1:{free_port()}/0")
    assert done.returncode == 2
    assert_one_clean_error(done.stderr, "no workflows to run", "-A module")


def test_a_wrong_password_is_one_line_without_the_password_and_exit_status_2():
    with RedisServer(extra_args=["--requirepass", "the-right-password"]) as server:
        url = f"redis://:a-wrong-password@127.0.0.1:{server.port}/0"
        done = run_worker_command("-A", "tests.apps.cli_app:registry", "--redis-url", url)
    assert done.returncode == 2
    assert_one_clean_error(done.stderr, "cannot start the worker", f"redis://***@127.0.0.1:{server.port}/0", "AuthenticationError")
    assert "a-wrong-password" not in done.stderr and "is not ready" not in done.stderr  # not retried: waiting cannot fix it


def test_an_unreachable_redis_is_retried_until_the_start_timeout_then_one_error():
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    # 2 s: a first try slower than the timeout less the first backoff (0.2 s) ends before any retry
    done = run_worker_command("-A", "tests.apps.cli_app:registry", "--redis-url", url, "--start-timeout", "2")
    assert done.returncode == 2
    assert_one_clean_error(done.stderr, "is not ready after", "ConnectionError", "redis://***@127.0.0.1")
    waits = [line for line in done.stderr.splitlines() if " WARNING " in line]
    assert waits and all("is not ready" in line and "next in" in line for line in waits)
    assert "s3cret" not in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_worker_waits_for_redis_ends_the_wait_with_exit_status_0(prefix, signum):
    with WorkerProcess(f"redis://127.0.0.1:{free_port()}/0", prefix, "--log-level", "info") as worker:
        wait_until(lambda: "is not ready" in worker.output(), timeout=30)
        worker.signal(signum)
        assert worker.wait(10) == 0
        output = worker.output()
    assert "stopping gracefully" in output and "stopped before the worker started" in output and "Traceback" not in output


def test_a_signal_as_the_worker_starts_stops_it_gracefully(redis_servers, prefix):
    """The handlers are in before the worker starts: no start-up moment meets the default action (death by SIGTERM)."""
    server = RedisServer().start()
    redis_servers.append(server)
    with WorkerProcess(server.url, prefix, "--log-level", "info") as worker:
        wait_until(lambda: "worker started" in worker.output() or "Redis at" in worker.output() or worker.proc.poll() is not None, 30)
        worker.signal(signal.SIGTERM)  # as early as the worker says anything
        assert worker.wait(30) == 0


def test_a_worker_started_before_its_redis_waits_for_it_then_runs(redis_servers, prefix):
    server = RedisServer()
    redis_servers.append(server)
    with WorkerProcess(server.url, prefix, "--log-level", "info") as worker:
        wait_until(lambda: "is not ready" in worker.output(), timeout=30)
        server.start()
        client = create_client(server.url, prefix=prefix, registry=cli_registry)
        try:
            assert client.run("count", {"key": f"{prefix}:seen", "n": 4}).result(30) == 5
        finally:
            client.close()
        assert worker.stop() == 0
        output = worker.output()
    assert "Traceback" not in output and "is ready (waited" in output and "worker started" in output


def test_a_full_redis_is_waited_for_and_the_worker_starts_once_it_has_room(redis_servers, prefix):
    server = RedisServer(extra_args=["--maxmemory", "1", "--maxmemory-policy", "noeviction"]).start()
    redis_servers.append(server)
    with WorkerProcess(server.url, prefix, "--log-level", "info") as worker:
        wait_until(lambda: "OutOfMemoryError" in worker.output(), timeout=30)
        admin = redis.Redis.from_url(server.url)
        admin.config_set("maxmemory", 0)  # room again
        admin.close()
        wait_until(lambda: "worker started" in worker.output(), timeout=30)
        assert worker.stop() == 0
        output = worker.output()
    assert "Traceback" not in output and "is not ready (OutOfMemoryError" in output


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (rex.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."), True),
        (rex.TimeoutError("Timeout connecting to server"), True),
        (rex.BusyLoadingError("Redis is loading the dataset in memory"), True),
        (rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), True),
        (rex.ReadOnlyError("You can't write against a read only replica."), True),
        (rex.TryAgainError("TRYAGAIN"), True),
        (rex.ClusterDownError("CLUSTERDOWN The cluster is down"), True),
        (rex.MasterDownError("MASTERDOWN Link with MASTER is down"), True),
        (rex.RedisClusterException("Redis Cluster cannot be connected. Please provide at least one reachable node: refused"), True),
        (rex.AuthenticationError("invalid username-password pair or user is disabled."), False),
        (rex.AuthorizationError("NOPERM"), False),
        (rex.NoPermissionError("this user has no permissions to run the 'hset' command"), False),
        (rex.ResponseError("ERR unknown command 'FCALL'"), False),
        (rex.RedisClusterException("ERROR sending 'cluster slots' command to redis server"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_which_start_up_errors_are_waited_for(error, transient):
    assert startup.is_transient(error) is transient


def test_a_cluster_that_refuses_the_password_is_not_waited_for():
    error = rex.RedisClusterException("Redis Cluster cannot be connected. Please provide at least one reachable node: WRONGPASS")
    error.__cause__ = rex.AuthenticationError("invalid username-password pair")
    assert startup.is_transient(error) is False


def test_retry_until_ready_backs_off_logs_each_try_and_returns_what_start_returns(monkeypatch, caplog):
    monkeypatch.setattr(startup, "BACKOFF_FIRST_S", 0.01)
    caplog.set_level(logging.INFO, logger="redflow.worker")
    tries = []

    def start():
        tries.append(1)
        if len(tries) < 3:
            raise rex.BusyLoadingError("Redis is loading the dataset in memory")
        return "worker"

    assert startup.retry_until_ready(start, where="redis://***@host:6379/0") == "worker"
    lines = [r.getMessage() for r in caplog.records]
    loading = "BusyLoadingError: Redis is loading the dataset in memory"
    assert lines[0] == f"Redis at redis://***@host:6379/0 is not ready ({loading}); try 1 failed, next in 0.0s"
    assert "try 2 failed, next in 0.0s" in lines[1] and lines[2].startswith("Redis at redis://***@host:6379/0 is ready (waited ")
    assert all(r.exc_info is None for r in caplog.records)  # no traceback

    def refused():
        raise rex.AuthenticationError("invalid password")

    with pytest.raises(rex.AuthenticationError):
        startup.retry_until_ready(refused, where="x")

    def down():
        raise rex.ConnectionError("refused")

    with pytest.raises(RedflowError, match=r"^Redis at x is not ready after 0s \(ConnectionError: refused\)$"):
        startup.retry_until_ready(down, where="x", timeout_s=0)
