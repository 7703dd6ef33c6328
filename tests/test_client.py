"""The client API (docs/guide/client.md) against a real redis-server."""

import time

import gevent
import pytest
import redis

from redflow import (
    CanceledError,
    CorruptDataError,
    InputValidationError,
    Registry,
    RunFailedError,
    RunNotFoundError,
    TimeoutError,
    UnknownWorkflowError,
    create_client,
    define_workflow,
)
from redflow.core import clock, codec
from redflow.core.errors import RedflowError
from redflow.core.idempotency import event_run_idempotency_key
from redflow.core.models import Unreadable, step_succeeded_json
from redflow.store.requests import SettleRequest, StartRequest


@pytest.fixture
def echo(registry):
    @define_workflow("echo", queue="q1", max_attempts=4, registry=registry)
    def echo(ctx):
        return ctx.input

    return echo


def work_one(client, queue, *, status="succeeded", output=None, error=None):
    """Play a worker for one run: claim, start, settle (exercises the scripts)."""
    k = client.keys
    run_id = client.redis.lmove(k.queue_ready(queue), k.queue_processing(queue), "RIGHT", "LEFT")
    assert run_id, "nothing to claim"
    token = "lease_test"
    reply = client.scripts.start_run(StartRequest(run_id, queue, token, 5000, clock.now_ms()))
    assert reply.kind == "started"
    settle = SettleRequest(run_id, queue, status, token, 5000, clock.now_ms(), codec.dumps(output), codec.dumps(error) if error else "")
    client.scripts.settle_run(settle)
    return run_id


def test_run_writes_the_data_model_hash_and_enqueues(client, echo, r):
    before = clock.now_ms()
    handle = echo.run({"x": 1}, client=client)
    k = client.keys
    assert handle.id.startswith("run_") and len(handle.id) == 40
    fields = r.hgetall(k.run(handle.id))
    assert fields["workflow"] == "echo" and fields["queue"] == "q1" and fields["status"] == "queued"
    assert fields["inputJson"] == '{"x":1}' and fields["attempt"] == "0" and fields["maxAttempts"] == "4"
    assert before <= int(fields["createdAt"]) <= clock.now_ms()
    assert fields["cancelRequestedAt"] == "" and fields["cancelReason"] == ""
    assert r.lrange(k.queue_ready("q1"), 0, -1) == [handle.id]
    assert r.zscore(k.runs_created(), handle.id) == int(fields["createdAt"])
    assert r.zscore(k.runs_status("queued"), handle.id) is not None
    assert r.zscore(k.workflow_runs("echo"), handle.id) is not None
    assert handle.status() == "queued"


def test_delayed_run_goes_to_the_scheduled_zset(client, echo, r):
    handle = client.run("echo", {"x": 1}, delay=30)
    k = client.keys
    fields = r.hgetall(k.run(handle.id))
    assert fields["status"] == "scheduled"
    available = int(fields["availableAt"])
    assert 29_000 <= available - int(fields["createdAt"]) <= 31_000
    assert r.zscore(k.queue_scheduled("q1"), handle.id) == available
    assert r.llen(k.queue_ready("q1")) == 0
    at = time.time() + 60
    later = client.run("echo", None, run_at=at)
    assert abs(int(r.hget(k.run(later.id), "availableAt")) - at * 1000) < 2
    with pytest.raises(RedflowError, match="not both"):
        client.run("echo", None, delay=1, run_at=at)


def test_queue_and_max_attempts_can_be_overridden(client, echo, r):
    handle = client.run(echo, {}, queue="other", max_attempts=1)
    fields = r.hgetall(client.keys.run(handle.id))
    assert fields["queue"] == "other" and fields["maxAttempts"] == "1"
    assert r.lrange(client.keys.queue_ready("other"), 0, -1) == [handle.id]


def test_same_idempotency_key_gives_the_same_run_once(client, echo, r):
    first = client.run("echo", {"n": 1}, idempotency_key="order-7")
    second = client.run("echo", {"n": 2}, idempotency_key="order-7")
    assert first.id == second.id
    assert r.llen(client.keys.queue_ready("q1")) == 1
    key = client.keys.idempotency("echo", "order-7")
    assert r.get(key) == first.id and 0 < r.ttl(key) <= 7 * 24 * 3600


def test_idempotency_holds_under_a_race_of_20_greenlets(redis_url, prefix, registry, echo, r):
    clients = [create_client(redis_url, prefix=prefix, registry=registry) for _ in range(4)]
    try:
        jobs = [gevent.spawn(clients[i % 4].run, "echo", {"i": i}, idempotency_key="race") for i in range(20)]
        gevent.joinall(jobs, raise_error=True)
        ids = {job.value.id for job in jobs}
        assert len(ids) == 1
        assert r.llen(clients[0].keys.queue_ready("q1")) == 1
        assert r.zcard(clients[0].keys.runs_created()) == 1
    finally:
        for c in clients:
            c.close()


def test_more_waiting_greenlets_than_pooled_connections_wait_their_turn(client, echo, start):
    # 300 result waits, each holding a pooled connection while it blocks, share a pool of 128:
    # greenlets wait for a free connection instead of failing with "Too many connections".
    handles = client.run_many("echo", [{"i": i} for i in range(300)])
    waits = [gevent.spawn(h.result, timeout=30) for h in handles]
    gevent.sleep(0.3)
    start(concurrency=20)
    gevent.joinall(waits, raise_error=True)
    assert [w.value for w in waits] == [{"i": i} for i in range(300)]
    assert client.redis.connection_pool.max_connections == 128


def test_a_client_built_on_a_bytes_redis_closes_the_decoding_pool_it_made(redis_url, prefix, registry, echo):
    import redis as redis_py

    raw = redis_py.Redis.from_url(redis_url)
    c = create_client(redis=raw, prefix=prefix, registry=registry)
    c.run("echo", {})
    pool = c.redis.connection_pool
    assert pool is not raw.connection_pool and pool._available_connections[0]._sock is not None
    c.close()
    assert all(conn._sock is None for conn in pool._available_connections) and raw.ping()
    raw.close()


def test_a_failed_or_canceled_run_frees_its_idempotency_key(client, echo):
    first = client.run("echo", {}, idempotency_key="k")
    work_one(client, "q1", status="failed", error={"name": "Error", "message": "x", "kind": "error"})
    retry = client.run("echo", {}, idempotency_key="k")
    assert retry.id != first.id
    assert client.cancel(retry.id)
    third = client.run("echo", {}, idempotency_key="k")
    assert third.id not in (first.id, retry.id)
    assert client.run("echo", {}, idempotency_key="k").id == third.id


def test_result_returns_the_output_once_a_worker_finishes(client, echo):
    handle = client.run("echo", {"v": 42})
    gevent.spawn_later(0.1, work_one, client, "q1", output={"v": 42})
    started = time.monotonic()
    assert handle.result(timeout=5) == {"v": 42}
    assert time.monotonic() - started < 2  # woken by the done token, not a long poll
    assert handle.status() == "succeeded"


def test_result_raises_run_failed_and_canceled_and_timeout(client, echo):
    failed = client.run("echo", {})
    work_one(client, "q1", status="failed", error={"name": "ValueError", "message": "bad", "kind": "error"})
    with pytest.raises(RunFailedError, match="ValueError: bad") as info:
        failed.result(timeout=1)
    assert info.value.error["message"] == "bad" and info.value.run_id == failed.id

    canceled = client.run("echo", {})
    client.cancel(canceled.id, reason="user asked")
    with pytest.raises(CanceledError, match="user asked"):
        canceled.result(timeout=1)

    pending = client.run("echo", {})
    with pytest.raises(TimeoutError):
        pending.result(timeout=0.3)
    with pytest.raises(RunNotFoundError):
        client.wait_for("run_missing", timeout=0.1)


def test_cancel_queued_scheduled_running_and_finished(client, echo, r):
    k = client.keys
    queued = client.run("echo", {})
    assert client.cancel(queued.id, reason="r1") is True
    fields = r.hgetall(k.run(queued.id))
    assert fields["status"] == "canceled" and fields["cancelReason"] == "r1" and int(fields["finishedAt"]) > 0
    assert r.zscore(k.runs_status("canceled"), queued.id) is not None
    assert r.zscore(k.runs_status("queued"), queued.id) is None

    scheduled = client.run("echo", {}, delay=60)
    assert client.cancel(scheduled.id) is True
    assert r.zscore(k.queue_scheduled("q1"), scheduled.id) is None
    assert r.hget(k.run(scheduled.id), "status") == "canceled"

    running = client.run("echo", {})
    run_id = r.lmove(k.queue_ready("q1"), k.queue_processing("q1"), "RIGHT", "LEFT")
    while run_id != running.id:  # the canceled ones are still in ready; a worker skips them
        run_id = r.lmove(k.queue_ready("q1"), k.queue_processing("q1"), "RIGHT", "LEFT")
    client.scripts.start_run(StartRequest(run_id, "q1", "t", 5000, clock.now_ms()))
    assert client.cancel(running.id, reason="stop") is True
    fields = r.hgetall(k.run(running.id))
    assert fields["status"] == "running" and int(fields["cancelRequestedAt"]) > 0
    # the worker's finalize turns a success into canceled when a cancel was requested
    final = client.scripts.settle_run(SettleRequest(run_id, "q1", "succeeded", "t", 5000, clock.now_ms(), output_json="1"))
    assert final.status == "canceled" and final.next is None

    assert client.cancel(running.id) is False  # already finished
    assert client.cancel("run_does_not_exist") is False


def test_get_run_and_get_steps(client, echo, r):
    handle = client.run("echo", {"a": 1}, idempotency_key="g")
    run = client.get_run(handle.id)
    assert run.id == handle.id and run.workflow == "echo" and run.queue == "q1"
    assert run.status == "queued" and run.input == {"a": 1} and run.output is None and run.attempt == 0
    assert run.max_attempts == 4 and abs(run.created_at - time.time()) < 5 and run.started_at is None
    steps_key = client.keys.run_steps(handle.id)
    r.hset(steps_key, "second", step_succeeded_json(2, 2000, 2100, '"b"'))
    r.hset(steps_key, "first", step_succeeded_json(1, 1000, 1100, '{"x":1}'))
    steps = client.get_steps(handle.id)
    assert [s.name for s in steps] == ["first", "second"]
    assert steps[0].output == {"x": 1} and steps[0].status == "succeeded" and steps[0].seq == 1
    assert steps[0].started_at == 1.0 and steps[0].finished_at == 1.1
    assert client.get_run("run_nope") is None and client.get_steps("run_nope") == []


def test_list_runs_filters_by_workflow_and_status(client, echo, registry):
    @define_workflow("other", registry=registry)
    def other(ctx):
        return None

    a = client.run("echo", {})
    b = client.run("echo", {})
    c = client.run("other", {})
    client.cancel(b.id)
    assert {x.id for x in client.list_runs()} == {a.id, b.id, c.id}
    assert {x.id for x in client.list_runs(workflow="echo")} == {a.id, b.id}
    assert [x.id for x in client.list_runs(workflow="echo", status="canceled")] == [b.id]
    assert [x.id for x in client.list_runs(status="queued", limit=1)] in ([a.id], [c.id])
    with pytest.raises(RedflowError, match="unknown run status"):
        client.list_runs(status="bogus")


def test_sync_registry_stores_metadata_and_triggers_and_drops_stale_ones(client, r, registry):
    @define_workflow("nightly", queue="batch", max_attempts=2, cron=[{"expression": "0 3 * * *", "input": {"full": True}}],
                     events=["user.created", "user.deleted"], registry=registry)  # fmt: skip
    def nightly(ctx):
        return None

    client.sync_registry(registry)
    k = client.keys
    assert r.smembers(k.workflows()) == {"nightly"}
    meta = r.hgetall(k.workflow("nightly"))
    assert meta["name"] == "nightly" and meta["queue"] == "batch" and meta["maxAttempts"] == "2"
    cron_ids = codec.loads(meta["cronIdsJson"])
    assert len(cron_ids) == 1 and cron_ids[0].startswith("cron_auto_")
    definition = codec.loads(r.hget(k.cron_def(), cron_ids[0]))
    assert definition == {"id": cron_ids[0], "workflow": "nightly", "queue": "batch", "expression": "0 3 * * *",
                          "timezone": None, "inputJson": '{"full":true}'}  # fmt: skip
    next_at = r.zscore(k.cron_next(), cron_ids[0])
    assert next_at > clock.now_ms()
    assert len(r.smembers(k.event_index("user.created"))) == 1

    client.sync_registry(registry)  # unchanged: the schedule is kept
    assert r.zscore(k.cron_next(), cron_ids[0]) == next_at

    registry.unregister("nightly")

    @define_workflow("nightly", queue="batch", cron=["30 4 * * *"], events=["user.created"], registry=registry)
    def nightly_v2(ctx):
        return None

    client.sync_registry(registry)
    assert r.hget(k.cron_def(), cron_ids[0]) is None and r.zscore(k.cron_next(), cron_ids[0]) is None
    assert r.hlen(k.cron_def()) == 1 and r.zcard(k.cron_next()) == 1
    assert r.smembers(k.event_index("user.deleted")) == set()
    assert len(r.smembers(k.event_index("user.created"))) == 1


def test_emit_and_schedule_event_start_one_run_per_subscriber_idempotently(client, registry, r):
    @define_workflow("welcome", events=["user.created"], registry=registry)
    def welcome(ctx):
        return None

    @define_workflow("audit", queue="audit", events=["user.created"], registry=registry)
    def audit(ctx):
        return None

    client.sync_registry(registry)
    ids = client.emit_event("user.created", {"id": 1}, idempotency_key="u1")
    assert len(ids) == 2
    assert {client.get_run(i).workflow for i in ids} == {"welcome", "audit"}
    assert all(client.get_run(i).input == {"id": 1} for i in ids)
    assert sorted(client.emit_event("user.created", {"id": 1}, idempotency_key="u1")) == sorted(ids)
    assert r.get(client.keys.idempotency("welcome", event_run_idempotency_key("user.created", "u1"))) in ids
    assert client.emit_event("nobody.listens", {}) == []

    later = client.schedule_event("user.created", {"id": 2}, at=time.time() + 60)
    assert {client.get_run(i).status for i in later} == {"scheduled"}
    with pytest.raises(RedflowError, match="at="):
        client.schedule_event("user.created", {})


def test_a_workflow_known_only_from_redis_metadata_can_be_started_by_name(client, registry, redis_url, prefix):
    @define_workflow("remote", queue="rq", max_attempts=7, registry=registry)
    def remote(ctx):
        return None

    client.sync_registry(registry)
    from redflow import Registry

    elsewhere = create_client(redis_url, prefix=prefix, registry=Registry())
    try:
        handle = elsewhere.run("remote", {"x": 1})
        run = elsewhere.get_run(handle.id)
        assert run.queue == "rq" and run.max_attempts == 7
    finally:
        elsewhere.close()


class CountingConnection(redis.Connection):
    """A redis-py connection counting round trips: one send per command or pipeline."""

    sends = 0

    def send_packed_command(self, command, check_health=True):
        CountingConnection.sends += 1
        return super().send_packed_command(command, check_health)


def round_trips(action):
    before = CountingConnection.sends
    action()
    return CountingConnection.sends - before


def test_starting_a_workflow_known_only_from_redis_is_one_round_trip_until_its_metadata_expires(client, registry, redis_url, prefix):
    @define_workflow("remote", queue="rq", max_attempts=7, registry=registry)
    def remote(ctx):
        return None

    client.sync_registry(registry)
    counted = redis.Redis.from_url(redis_url, decode_responses=True, connection_class=CountingConnection)
    elsewhere = create_client(redis=counted, prefix=prefix, registry=Registry())
    try:
        elsewhere.run("remote", {})  # reads the metadata, Redis's clock, loads the script
        assert [round_trips(lambda: elsewhere.run("remote", {})) for _ in range(3)] == [1, 1, 1]

        @define_workflow("remote", queue="rq2", max_attempts=2, registry=(moved := Registry()))
        def remote_moved(ctx):
            return None

        client.sync_registry(moved)  # a deploy moves the workflow to another queue
        assert elsewhere.get_run(elsewhere.run("remote", {}).id).queue == "rq"  # within the expiry: the cached queue
        elsewhere.workflow_meta_ttl_s = 0.01
        gevent.sleep(0.02)
        assert round_trips(lambda: elsewhere.run("remote", {})) == 2  # expired: read again
        run = elsewhere.get_run(elsewhere.run("remote", {}).id)
        assert (run.queue, run.max_attempts) == ("rq2", 2)
        with pytest.raises(UnknownWorkflowError):
            elsewhere.run("not-synced", {})
        counted.hset(elsewhere.keys.workflow("not-synced"), "queue", "late")
        assert elsewhere.get_run(elsewhere.run("not-synced", {}).id).queue == "late"  # an unknown name is never cached
    finally:
        elsewhere.close()
        counted.close()


# -- bad input: each a clear error, nothing half-written -----------------------


def test_non_json_input_is_rejected_before_anything_is_written(client, echo, r):
    with pytest.raises(InputValidationError, match="not JSON-serializable"):
        client.run("echo", {"when": object()})
    assert r.zcard(client.keys.runs_created()) == 0


def test_unknown_workflow_name_is_rejected(client):
    with pytest.raises(UnknownWorkflowError, match="nope"):
        client.run("nope", {})


def test_schema_invalid_input_is_rejected(client, registry):
    def needs_email(value):
        if "@" not in str(value.get("email", "")):
            raise ValueError("email must contain @")
        return value

    @define_workflow("signup", schema=needs_email, registry=registry)
    def signup(ctx):
        return None

    with pytest.raises(InputValidationError, match="email must contain @"):
        client.run("signup", {"email": "nope"})
    assert client.run("signup", {"email": "a@b"}).status() == "queued"


def test_a_corrupt_run_hash_gives_a_clear_error(client, echo, r):
    """A payload that does not decode stands as Unreadable (its raw text and why); a broken status raises."""
    handle = client.run("echo", {})
    r.hset(client.keys.run(handle.id), "inputJson", "{garbage")
    run = client.get_run(handle.id)
    assert isinstance(run.input, Unreadable) and run.input.raw == "{garbage" and "unexpected" in run.input.reason.lower()
    r.hset(client.keys.run(handle.id), mapping={"inputJson": "{}", "status": "exploded"})
    with pytest.raises(CorruptDataError, match="unknown status 'exploded'"):
        client.get_run(handle.id)
    r.hset(client.keys.run(handle.id), mapping={"status": "queued", "attempt": "many"})
    with pytest.raises(CorruptDataError, match="'attempt' is not an integer"):
        client.get_run(handle.id)


def test_bad_run_options_are_rejected(client, echo):
    with pytest.raises(RedflowError, match="max_attempts"):
        client.run("echo", {}, max_attempts=0)
    with pytest.raises(RedflowError, match="idempotency_key"):
        client.run("echo", {}, idempotency_key="")


def test_a_redis_that_is_gone_gives_a_connection_error(registry, echo):
    import redis

    from redflow.testing import free_port

    gone = create_client(f"redis://127.0.0.1:{free_port()}/0", registry=registry)
    gone.redis.connection_pool.connection_kwargs["retry"] = None
    with pytest.raises(redis.exceptions.ConnectionError):
        gone.run("echo", {})
    gone.close()
