"""A Redis Sentinel URL (single primary) works for the client and the worker."""

import re
import subprocess
from pathlib import Path

import pytest
import redis
from helpers import wait_until

from redflow import UnknownWorkflowError, create_client, define_workflow, start_worker
from redflow.core.errors import RedflowError
from redflow.store.connection import close_redis
from redflow.testing import RedisServer, free_port


@pytest.fixture
def sentinel(redis_servers, tmp_path):
    primary = RedisServer().start()
    redis_servers.append(primary)
    port = free_port()
    conf = Path(tmp_path) / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor main 127.0.0.1 {primary.port} 1\nsentinel down-after-milliseconds main 1000\n"
    )
    proc = subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with redis.Redis(port=port, decode_responses=True) as probe:
            wait_until(lambda: _masters(probe), timeout=10, message="sentinel to know its primary")
        yield f"redis+sentinel://127.0.0.1:{port}/main", primary
    finally:
        proc.kill()
        proc.wait()


def _masters(probe):
    try:
        return probe.sentinel_masters()
    except redis.RedisError:
        return None


def test_client_and_worker_work_through_a_sentinel_url(sentinel, registry, prefix):
    url, primary = sentinel

    @define_workflow("via-sentinel", registry=registry)
    def via_sentinel(ctx):
        return ctx.step.run("s", lambda: ctx.input + 1)

    client = create_client(url, prefix=prefix, registry=registry)
    worker = start_worker(registry, url=url, prefix=prefix, concurrency=2)
    try:
        assert client.run("via-sentinel", 41).result(10) == 42
        searched = re.escape(f"synced to {url}/0 under prefix {prefix!r}); did you mean 'via-sentinel'?")
        with pytest.raises(UnknownWorkflowError, match=searched):
            client.run("via-sentinal", 41)  # the error names the Sentinel URL the client was given
        with redis.Redis(port=primary.port, decode_responses=True) as direct:
            assert direct.exists(client.keys.workflow("via-sentinel")) == 1  # the data is on the primary
    finally:
        worker.stop(timeout=5)
        client.close()


def test_a_sentinel_url_without_a_service_name_is_a_clear_error():
    with pytest.raises(RedflowError, match="names the service"):
        create_client("redis+sentinel://127.0.0.1:26379")


def test_a_bytes_mode_sentinel_client_is_refused_with_what_to_pass_instead(sentinel):
    from redis.sentinel import Sentinel

    url, _ = sentinel
    manager = Sentinel([("127.0.0.1", int(url.rsplit(":", 1)[1].split("/")[0]))])
    raw = manager.master_for("main")
    decoding = manager.master_for("main", decode_responses=True)
    try:
        with pytest.raises(RedflowError, match="decode_responses=True"):
            create_client(redis=raw)
        client = create_client(redis=decoding)
        assert client.get_run("run_00000000-0000-4000-8000-000000000000") is None
    finally:
        raw.close()
        close_redis(decoding)  # and the Sentinel clients behind it
