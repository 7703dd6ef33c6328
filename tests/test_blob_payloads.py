"""Payloads stored as ``@blob:`` references (the asyncio ``redflow`` package's
large-payload form, redflow/core/blobs.py), through the client and the worker:

- written only over ``blob_threshold=`` (off by default: the TypeScript 0.0.1
  client reads every payload this package writes), the reference and its blob
  by one script;
- read wherever a payload is read: the worker's input, step replays, the
  handle's result and error, ``get_run``, ``get_steps``, listings, progress;
- a reference to a missing blob fails its run without retry (MissingBlobError
  naming the run), shows as Unreadable in listings, and breaks nothing else;
- deleted with the run by retention and purge.
"""

from __future__ import annotations

import pytest
from helpers import wait_until

from redflow import MissingBlobError, RunFailedError, create_client, define_workflow
from redflow.core import blobs
from redflow.core.errors import RedflowError
from redflow.core.models import Unreadable

BIG = {"text": "z" * 3000}  # 3 KiB of JSON: over the 1 KiB threshold
SMALL = {"n": 1}


@pytest.fixture
def blob_client(redis_url, prefix, registry):
    c = create_client(redis_url, prefix=prefix, registry=registry, blob_threshold=1024)
    yield c
    c.close()


def is_ref(value: str | None) -> bool:
    return bool(value) and value.startswith("@blob:v1:")


def finished_big_run(start, blob_client, registry, name: str, **options):
    """A run of a workflow that returns BIG, from the input BIG, finished by a worker writing references."""
    big = define_workflow(name, registry=registry, **options)(lambda ctx: BIG)
    start(blob_threshold=1024, retention_interval_s=0.05)
    handle = big.run(BIG, client=blob_client)
    assert handle.result(10) == BIG
    return handle


def test_by_default_nothing_is_written_by_reference(start, client, registry, r):
    @define_workflow("plain-echo", registry=registry)
    def echo(ctx):
        ctx.step.run("s", lambda: BIG)
        return ctx.input

    start()
    handle = echo.run(BIG, client=client)
    assert handle.result(10) == BIG
    run = r.hgetall(client.keys.run(handle.id))
    assert run["inputJson"].startswith("{") and run["outputJson"].startswith("{")
    assert r.hget(client.keys.run_steps(handle.id), "s").startswith('{"status":"succeeded"')
    assert r.exists(client.keys.run_blobs(handle.id)) == 0


def test_over_the_threshold_inputs_outputs_and_step_outputs_go_to_the_blob_hash_and_read_back(start, blob_client, registry, r):
    @define_workflow("blob-echo", registry=registry)
    def echo(ctx):
        out = ctx.step.run("s", lambda: BIG)
        ctx.step.run("small", lambda: SMALL)
        return {"input": ctx.input, "step": out}

    start(blob_threshold=1024)
    handle = echo.run(BIG, client=blob_client)
    assert handle.result(10) == {"input": BIG, "step": BIG}
    keys = blob_client.keys
    run, blob_hash = r.hgetall(keys.run(handle.id)), r.hgetall(keys.run_blobs(handle.id))
    assert is_ref(run["inputJson"]) and is_ref(run["outputJson"])
    step = r.hget(keys.run_steps(handle.id), "s")
    assert '"outputJson":"@blob:v1:' in step and r.hget(keys.run_steps(handle.id), "small").count("@blob:") == 0
    # every reference names a blob that is there (one script wrote both), and identical payloads share one
    refs = {run["inputJson"], run["outputJson"], *blobs.refs_in(step)}
    assert {ref.removeprefix("@blob:") for ref in refs} <= set(blob_hash)
    assert blobs.resolve(run["inputJson"], blob_hash, run_id=handle.id, field="inputJson") == '{"text":"' + "z" * 3000 + '"}'
    got = blob_client.get_run(handle.id)
    assert (got.input, got.output) == (BIG, {"input": BIG, "step": BIG})
    assert [(s.name, s.output) for s in blob_client.get_steps(handle.id)] == [("s", BIG), ("small", SMALL)]
    (listed,) = blob_client.list_runs(workflow="blob-echo")
    assert (listed.input, listed.output) == (BIG, {"input": BIG, "step": BIG})


def test_a_retried_run_replays_a_step_whose_output_is_a_blob(start, blob_client, registry, r):
    calls = []

    @define_workflow("blob-replay", max_attempts=2, registry=registry)
    def replay(ctx):
        out = ctx.step.run("big", lambda: calls.append(1) or BIG)
        if ctx.run.attempt == 1:
            raise RuntimeError("once")
        return out

    start(blob_threshold=1024)
    handle = replay.run(None, client=blob_client)
    assert handle.result(10) == BIG and calls == [1] and blob_client.get_run(handle.id).attempt == 2


def test_a_large_error_is_stored_by_reference_and_raised_through_the_handle(start, blob_client, registry, r):
    @define_workflow("blob-fail", max_attempts=1, registry=registry)
    def fail(ctx):
        raise ValueError("x" * 2000)

    start(blob_threshold=1024)
    handle = fail.run(None, client=blob_client)
    with pytest.raises(RunFailedError) as failed:
        handle.result(10)
    assert failed.value.error["message"] == "x" * 2000
    assert is_ref(r.hget(blob_client.keys.run(handle.id), "errorJson"))
    assert blob_client.get_run(handle.id).error["message"] == "x" * 2000


def test_the_blob_threshold_is_checked_where_it_is_given(redis_url, prefix):
    for bad in (-1, 1.5, "1024", True):
        with pytest.raises(RedflowError, match="blob_threshold must be a number of bytes"):
            create_client(redis_url, prefix=prefix, blob_threshold=bad)
    with pytest.raises(RedflowError, match="compat must be one of 'redflow-0.1'"):
        create_client(redis_url, prefix=prefix, compat="redflow-0.2")
    assert create_client(redis_url, prefix=prefix, compat="redflow-0.1").store.payloads.threshold_bytes == 1024
    assert create_client(redis_url, prefix=prefix, compat="redflow-0.1", blob_threshold=0).store.payloads.threshold_bytes == 0


# -- a reference to a blob that is not there ---------------------------------


def test_an_input_whose_blob_is_missing_fails_its_run_without_retry_and_the_others_run(start, blob_client, registry, r):
    seen = []

    @define_workflow("blob-input", max_attempts=3, registry=registry)
    def take(ctx):
        seen.append(ctx.input)
        return "ran"

    broken = take.run(BIG, client=blob_client)
    r.delete(blob_client.keys.run_blobs(broken.id))  # as a purge of its blobs alone, or a writer that died, would leave it
    fine = take.run(BIG, client=blob_client)
    start()  # a worker without a threshold reads references all the same
    assert fine.result(10) == "ran" and seen == [BIG]
    with pytest.raises(RunFailedError) as failed:
        broken.result(10)
    assert failed.value.error["name"] == "MissingBlobError" and broken.id in failed.value.error["message"]
    assert "inputJson" in failed.value.error["message"]
    run = blob_client.get_run(broken.id)
    assert run.attempt == 1 and run.status == "failed"  # not retried: the blob will not come back
    assert isinstance(run.input, Unreadable) and broken.id in run.input.reason
    listed = {run.id: run for run in blob_client.list_runs(workflow="blob-input")}
    assert isinstance(listed[broken.id].input, Unreadable) and listed[fine.id].input == BIG


def test_a_step_output_whose_blob_is_missing_fails_the_replay_without_retry(start, blob_client, registry, r):
    @define_workflow("blob-step-gone", max_attempts=3, registry=registry)
    def flow(ctx):
        out = ctx.step.run("big", lambda: BIG)
        if ctx.run.attempt == 1:
            r.delete(blob_client.keys.run_blobs(ctx.run.id))
            raise RuntimeError("retry, to replay the step")
        return out

    start(blob_threshold=1024)
    handle = flow.run(None, client=blob_client)
    with pytest.raises(RunFailedError) as failed:
        handle.result(10)
    assert failed.value.error["name"] == "MissingBlobError" and "step 'big' outputJson" in failed.value.error["message"]
    assert blob_client.get_run(handle.id).attempt == 2
    (step,) = blob_client.get_steps(handle.id)
    assert isinstance(step.output, Unreadable)


def test_an_output_whose_blob_is_missing_raises_naming_the_run_and_lists_as_unreadable(start, blob_client, registry, r):
    handle = finished_big_run(start, blob_client, registry, "blob-output-gone")
    r.delete(blob_client.keys.run_blobs(handle.id))
    with pytest.raises(MissingBlobError) as missing:
        handle.result(1)
    assert missing.value.run_id == handle.id and missing.value.field == "outputJson"
    assert isinstance(blob_client.get_run(handle.id).output, Unreadable)
    (listed,) = blob_client.list_runs(workflow="blob-output-gone")
    assert isinstance(listed.output, Unreadable) and handle.status() == "succeeded"


def test_progress_stored_by_another_writer_as_a_reference_is_read(blob_client, registry, r):
    @define_workflow("blob-progress", registry=registry)
    def idle(ctx):
        return None

    handle = idle.run(None, client=blob_client)
    stored = blobs.encode('{"done":"' + "y" * 2000 + '"}', 1024)
    assert stored.blob is not None
    r.hset(blob_client.keys.run_blobs(handle.id), *stored.blob)
    r.hset(blob_client.keys.run(handle.id), "progressJson", stored.value)
    assert handle.progress() == {"done": "y" * 2000}


# -- cleaning ------------------------------------------------------------------


def test_purge_deletes_the_blob_hash_with_the_run(start, blob_client, registry, r):
    handle = finished_big_run(start, blob_client, registry, "blob-purged")
    assert r.exists(blob_client.keys.run_blobs(handle.id)) == 1
    assert blob_client.purge(older_than=0) == 1
    assert r.exists(blob_client.keys.run_blobs(handle.id), blob_client.keys.run(handle.id)) == 0


def test_retention_deletes_the_blob_hash_with_the_run(start, blob_client, registry, r):
    handle = finished_big_run(start, blob_client, registry, "blob-kept-briefly", retention=1)
    wait_until(lambda: r.exists(blob_client.keys.run(handle.id)) == 0, timeout=10)
    assert r.exists(blob_client.keys.run_blobs(handle.id)) == 0  # the purge script deletes the run's keys in one call
