"""A full or evicting Redis: a clear redflow error when Redis is out of memory
(nothing enqueued, nothing lost), an ERROR naming the fix when its policy may
evict runs (a refusal with the flag), and one word where CONFIG is not allowed."""

from __future__ import annotations

import logging
import os
import subprocess

import pytest
import redis
from gevent.event import Event
from helpers import CLI, ROOT, WorkerProcess, wait_until
from redis.exceptions import OutOfMemoryError

from redflow import EvictingRedisError, RedisFullError, Registry, create_client, define_workflow, start_worker
from redflow.store import memory
from redflow.testing import RedisServer


def server(redis_servers, *args: str) -> RedisServer:
    started = RedisServer(extra_args=list(args)).start()
    redis_servers.append(started)
    return started


def fill(r: redis.Redis) -> list[str]:
    """Write 100 kB values until Redis refuses with OOM, then set maxmemory a
    little below what it uses: it stays full (a refused write frees its own
    buffer, and Redis shrinks idle buffers, so "just at the limit" would let
    small writes through now and then). Returns the keys written."""
    keys: list[str] = []
    while True:
        try:
            r.set(f"filler:{len(keys)}", "x" * 100_000)
        except OutOfMemoryError:
            break
        keys.append(f"filler:{len(keys)}")
        assert len(keys) < 1000, "Redis never said it was full"
    r.config_set("maxmemory", int(r.info("memory")["used_memory"]) - 1_000_000)
    with pytest.raises(OutOfMemoryError):
        r.set("filler:probe", "x")
    return keys


def free(r: redis.Redis, keys: list[str]) -> None:
    """Give Redis room again: the fillers go, the limit is 20 MB again."""
    r.delete(*keys)
    r.config_set("maxmemory", "20mb")


def memory_log(caplog) -> list[logging.LogRecord]:
    return [rec for rec in caplog.records if rec.name == "redflow.memory"]


def test_a_full_redis_refuses_a_new_run_with_a_redflow_error_and_loses_nothing(redis_servers, prefix):
    full = server(redis_servers, "--maxmemory", "20mb", "--maxmemory-policy", "noeviction")
    r = redis.Redis.from_url(full.url, decode_responses=True)
    registry, release, executions = Registry(), Event(), []

    @define_workflow("held", registry=registry)
    def held(ctx):
        executions.append(ctx.input)
        release.wait(30)
        return ctx.input

    client = create_client(full.url, prefix=prefix, registry=registry)
    worker = start_worker(registry, url=full.url, prefix=prefix, concurrency=4, lease_ms=1000, blmove_timeout=0.2, clean_retention=False)
    try:
        before = [held.run(i, client=client) for i in range(12)]  # 4 running, 8 queued
        wait_until(lambda: len(executions) == 4)
        fillers = fill(r)
        created = r.zcard(client.keys.runs_created())
        with pytest.raises(RedisFullError, match="out of memory.*nothing was enqueued") as refused:
            client.run("held", 99)
        assert isinstance(refused.value.__cause__, OutOfMemoryError)
        with pytest.raises(RedisFullError, match="run_many"):
            client.run_many("held", range(3))
        assert r.zcard(client.keys.runs_created()) == created and r.llen(client.keys.queue_ready("default")) == 8
        release.set()  # the runs in flight end while Redis is full, or once it has room again
        free(r, fillers)
        for handle in before:
            assert handle.result(20) == int(handle.get().input)
        assert sorted(executions) == list(range(12))  # each ran once: nothing lost, nothing twice
        assert held.run(100, client=client).result(10) == 100
    finally:
        release.set()
        worker.stop(timeout=5)
        client.close()
        r.close()


def test_a_worker_command_started_on_a_full_redis_waits_and_runs_everything_once_memory_is_freed(redis_servers, prefix):
    from tests.apps.cli_app import registry as app_registry

    full = server(redis_servers, "--maxmemory", "20mb", "--maxmemory-policy", "noeviction")
    r = redis.Redis.from_url(full.url, decode_responses=True)
    client = create_client(full.url, prefix=prefix, registry=app_registry)
    handles = client.run_many("count", [{"key": f"{prefix}:execs", "n": i} for i in range(20)])
    fillers = fill(r)
    with WorkerProcess(full.url, prefix) as worker:
        wait_until(lambda: "OutOfMemoryError" in worker.output() and "not ready" in worker.output(), timeout=30)
        assert worker.proc.poll() is None and client.count_runs("queued") == 20
        free(r, fillers)
        wait_until(lambda: client.count_runs("succeeded") == 20, timeout=60)
    assert [h.result(1) for h in handles] == [i + 1 for i in range(20)]
    assert sorted(r.hgetall(f"{prefix}:execs").values()) == ["1"] * 20  # each handler ran once
    client.close()
    r.close()


def test_purge_frees_a_full_redis_because_it_only_deletes(redis_servers, prefix):
    full = server(redis_servers, "--maxmemory", "20mb", "--maxmemory-policy", "noeviction")
    r = redis.Redis.from_url(full.url, decode_responses=True)
    registry = Registry()
    define_workflow("done", registry=registry)(lambda ctx: None)
    client = create_client(full.url, prefix=prefix, registry=registry)
    handles = client.run_many("done", range(30))
    k, now = client.keys, client.now_ms()
    for h in handles:  # finished, as a worker leaves them
        r.hset(k.run(h.id), mapping={"status": "succeeded", "finishedAt": now})
        r.zrem(k.runs_status("queued"), h.id)
        r.zadd(k.runs_status("succeeded"), {h.id: now})
    r.delete(k.queue_ready("default"))
    fill(r)
    with pytest.raises(RedisFullError):
        client.run("done")
    assert client.purge(older_than=0) == 30
    assert r.zcard(k.runs_created()) == 0
    client.close()
    r.close()


def test_an_evicting_redis_is_an_error_in_the_log_and_a_refusal_with_the_flag(redis_servers, prefix, caplog, monkeypatch):
    lru = server(redis_servers, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
    registry = Registry()
    define_workflow("w", registry=registry)(lambda ctx: ctx.input)
    with pytest.raises(EvictingRedisError, match="allkeys-lru.*noeviction.*refusing to start"):
        start_worker(registry, url=lru.url, prefix=prefix, refuse_evicting_redis=True)
    monkeypatch.setenv("REDFLOW_REFUSE_EVICTING_REDIS", "1")
    with pytest.raises(EvictingRedisError):
        start_worker(registry, url=lru.url, prefix=prefix)
    monkeypatch.delenv("REDFLOW_REFUSE_EVICTING_REDIS")
    caplog.set_level(logging.ERROR, logger="redflow.memory")
    worker = start_worker(registry, url=lru.url, prefix=prefix, blmove_timeout=0.2)
    try:
        errors = [rec for rec in memory_log(caplog) if rec.levelno == logging.ERROR]
        assert len(errors) == 1 and f"127.0.0.1:{lru.port}" in errors[0].getMessage()
        assert "'allkeys-lru'" in errors[0].getMessage() and "CONFIG SET maxmemory-policy noeviction" in errors[0].getMessage()
        client = create_client(lru.url, prefix=prefix, registry=registry)
        assert client.run("w", 5).result(10) == 5  # it goes on
        assert len([rec for rec in memory_log(caplog) if rec.levelno == logging.ERROR]) == 1  # said once per process
        client.close()
    finally:
        worker.stop(timeout=5)


def test_create_client_checks_the_policy_once_per_redis(redis_servers, prefix, caplog):
    volatile = server(redis_servers, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")
    caplog.set_level(logging.DEBUG, logger="redflow.memory")
    for _ in range(3):
        create_client(volatile.url, prefix=prefix).close()
    assert [rec.levelno for rec in memory_log(caplog)] == [logging.ERROR]
    assert "volatile-lru" in memory_log(caplog)[0].getMessage()


def test_a_redis_that_does_not_allow_config_is_said_once_and_the_worker_goes_on(redis_servers, prefix, caplog):
    guarded = server(redis_servers)
    admin = redis.Redis.from_url(guarded.url, decode_responses=True)
    admin.execute_command("ACL", "SETUSER", "app", "on", ">app-secret-pw", "~*", "&*", "+@all", "-config")
    url = f"redis://app:app-secret-pw@127.0.0.1:{guarded.port}/0"
    caplog.set_level(logging.INFO, logger="redflow.memory")
    registry = Registry()
    define_workflow("w", registry=registry)(lambda ctx: ctx.input)
    client = create_client(url, prefix=prefix, registry=registry)
    worker = start_worker(registry, url=url, prefix=prefix, blmove_timeout=0.2, refuse_evicting_redis=True)
    try:
        assert client.run("w", 7).result(10) == 7
        said = memory_log(caplog)
        assert len(said) == 1 and said[0].levelno == logging.WARNING
        assert "cannot read maxmemory-policy" in said[0].getMessage() and "app-secret-pw" not in said[0].getMessage()
    finally:
        worker.stop(timeout=5)
        client.close()
        admin.close()


def test_the_worker_command_refuses_an_evicting_redis_when_the_environment_says_so(redis_servers, prefix):
    lru = server(redis_servers, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
    env = dict(os.environ, REDIS_URL=lru.url, PYTHONPATH=str(ROOT), REDFLOW_REFUSE_EVICTING_REDIS="1")
    cmd = [CLI, "worker", "-A", "tests.apps.cli_app:registry", "--prefix", prefix]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "cannot start the worker" in done.stderr and "maxmemory-policy noeviction" in done.stderr
    assert "refusing to start" in done.stderr and "Traceback" not in done.stderr


def test_the_policy_check_names_the_redis_without_its_password():
    client = redis.Redis.from_url("redis://user:hunter2-password@127.0.0.1:1/3")
    assert memory.redis_target(client) == "127.0.0.1:1/3"
