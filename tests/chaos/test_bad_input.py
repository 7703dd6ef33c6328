"""Promise 7: bad input is a clear error, never a crash of the worker.

One worker process serves the whole module; after every piece of bad input
the same process (same pid) must still run the ``echo`` canary. Runs
written by hand follow DATA_MODEL.md, then have a field dropped or garbled.
"""

from __future__ import annotations

import hashlib
import time

import pytest
from helpers import wait_until

from redflow import RunFailedError, create_client, define_workflow
from redflow.core import clock, codec
from redflow.registry import Registry
from tests.chaos.harness import UNRUNNABLE_ENTRIES, error_of, new_run_id

# -- run hashes with missing or garbage fields ----------------------------------------------

FIELD_CASES = [
    # id, workflow, fields, status, error name, words the error message must contain
    ("no-workflow", "echo", {"workflow": None}, "failed", "UnknownWorkflowError", "no workflow name"),
    ("no-inputJson", "echo", {"inputJson": None}, "succeeded", None, None),
    ("no-attempt-createdAt-or-cancel-fields", "echo",
     {"attempt": None, "createdAt": None, "cancelRequestedAt": None, "cancelReason": None}, "succeeded", None, None),
    ("no-maxAttempts-means-one-attempt", "fails", {"maxAttempts": None}, "failed", "ValueError", "fails on purpose"),
    ("attempt-not-a-number", "echo", {"attempt": "abc"}, "failed", "CorruptDataError", "'attempt'"),
    ("createdAt-not-a-number", "echo", {"createdAt": "yesterday"}, "failed", "CorruptDataError", "'createdAt'"),
    ("maxAttempts-not-a-number", "echo", {"maxAttempts": "lots"}, "failed", "CorruptDataError", "'maxAttempts'"),
    ("inputJson-not-json", "echo", {"inputJson": "{not json"}, "failed", "CorruptDataError", "inputJson is not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("workflow", "fields", "status", "error", "words"), [c[1:] for c in FIELD_CASES],
                         ids=[c[0] for c in FIELD_CASES])  # fmt: skip
def test_a_run_hash_with_a_missing_or_garbage_field_ends_with_a_clear_outcome(bench, workflow, fields, status, error, words):
    run_id = bench.write_run(new_run_id(), workflow, fields)
    final = bench.wait_terminal(run_id)
    assert final["status"] == status
    if status == "succeeded":
        assert codec.loads(final["outputJson"])["input"] == (None if "inputJson" in fields else {"n": 1})
    else:
        assert error_of(final)["name"] == error and words in error_of(final)["message"]
    assert bench.side.handler(run_id) <= 1  # no retry of a run that cannot work
    bench.still_serves()


@pytest.mark.parametrize("case", UNRUNNABLE_ENTRIES)
def test_a_queue_entry_naming_no_runnable_run_is_dropped_untouched_and_the_worker_carries_on(bench, case):
    run_id, before = bench.push_unrunnable(case)
    wait_until(lambda: not bench.in_queue(run_id), timeout=20, message="the entry to be dropped")
    k = bench.keys
    assert bench.r.hgetall(k.run(run_id)) == before  # not created, not changed
    assert bench.r.exists(k.run_lease(run_id), k.run_steps(run_id), k.run_done(run_id)) == 0
    assert bench.side.handler(run_id) == 0
    bench.still_serves()


# -- garbage JSON in cron definitions (stored steps: see the engine bugs) -----------------------------------


def cron_def(cron_id: str, **overrides) -> str:
    definition = {"id": cron_id, "workflow": "echo", "queue": "default", "expression": "* * * * * *", "timezone": None,
                  "inputJson": codec.dumps({"from": cron_id})}  # fmt: skip
    definition.update(overrides)
    return codec.dumps({k: v for k, v in definition.items() if v is not None})


def test_garbage_cron_definitions_are_dropped_with_a_log_line_and_a_good_one_beside_them_still_fires(bench):
    k, r = bench.keys, bench.r
    dropped = {
        "cron_chaos_not_json": "{not json",
        "cron_chaos_not_an_object": "[1,2,3]",
        "cron_chaos_input_not_json": cron_def("cron_chaos_input_not_json", inputJson="{nope"),
        "cron_chaos_bad_expression": cron_def("cron_chaos_bad_expression", expression="every other tuesday"),
        "cron_chaos_bad_timezone": cron_def("cron_chaos_bad_timezone", timezone="Mars/Olympus_Mons"),
        "cron_chaos_no_workflow": cron_def("cron_chaos_no_workflow", workflow=None),
    }
    kept = {
        "cron_chaos_good": cron_def("cron_chaos_good"),
        "cron_chaos_unknown": cron_def("cron_chaos_unknown", workflow="vanished"),
    }
    r.hset(k.cron_def(), mapping={**dropped, **kept})
    r.zadd(k.cron_next(), dict.fromkeys([*dropped, *kept], clock.now_ms()))
    try:
        wait_until(lambda: all(r.zscore(k.cron_next(), cron_id) is None for cron_id in dropped), timeout=20)

        def fired_good_cron() -> bool:
            for run_id in r.zrange(k.workflow_runs("echo"), 0, -1):
                if r.hmget(k.run(run_id), "inputJson", "status") == ['{"from":"cron_chaos_good"}', "succeeded"]:
                    return True
            return False

        wait_until(fired_good_cron, timeout=20, interval=0.1, message="the good cron to fire")
        wait_until(lambda: "cron cron_chaos_unknown could not start 'vanished'" in bench.worker.output(), timeout=10)
        for cron_id in dropped:
            assert f"cron {cron_id} dropped" in bench.worker.output()
        assert r.zscore(k.cron_next(), "cron_chaos_unknown") is not None  # a transient cause keeps its schedule
    finally:
        r.hdel(k.cron_def(), *kept)
        r.zrem(k.cron_next(), *kept)
    bench.still_serves()


# -- workflows and handlers that misbehave ---------------------------------------------------


def test_runs_of_a_workflow_removed_from_the_registry_fail_as_unknown_without_retry(bench):
    old_registry = Registry()

    @define_workflow("retired", registry=old_registry)
    def retired(ctx):  # the old deploy had it; the running worker does not
        return "never"

    old_client = create_client(bench.url, prefix=bench.prefix, registry=old_registry)
    try:
        handles = [old_client.run("retired", {"n": n}) for n in range(5)]
    finally:
        old_client.close()
    for handle in handles:
        final = bench.wait_terminal(handle.id)
        assert final["status"] == "failed" and final["attempt"] == "1"
        assert error_of(final)["kind"] == "unknown_workflow" and "retired" in error_of(final)["message"]
    bench.still_serves()


@pytest.mark.parametrize("kind", ["set", "object", "bigint"])
@pytest.mark.parametrize("workflow", ["non-json-output", "non-json-step"])
def test_a_result_that_is_not_json_fails_the_run_without_retry_as_a_serialization_error(bench, workflow, kind):
    handle = bench.client.run(workflow, {"kind": kind})
    with pytest.raises(RunFailedError) as failure:
        handle.result(timeout=30)
    assert failure.value.error["name"] == "OutputSerializationError" and failure.value.error["kind"] == "serialization"
    assert bench.client.get_run(handle.id).attempt == 1 and bench.side.handler(handle.id) == 1
    if workflow == "non-json-step":
        assert [(s.name, s.status) for s in bench.client.get_steps(handle.id)] == [("s", "failed")]
    bench.still_serves()


@pytest.mark.parametrize("where", ["handler", "step"])
@pytest.mark.parametrize("what", ["KeyboardInterrupt", "SystemExit", "GreenletExit", "gevent.Timeout"])
def test_a_base_exception_raised_by_a_handler_fails_its_run_and_the_worker_carries_on(bench, what, where):
    handle = bench.client.run("raise-base", {"what": what, "where": where})
    with pytest.raises(RunFailedError) as failure:
        handle.result(timeout=30)
    assert failure.value.error["name"] == what.rpartition(".")[2]
    assert bench.client.get_run(handle.id).attempt == 1 and bench.side.handler(handle.id) == 1
    bench.still_serves()


@pytest.mark.parametrize("how", ["sleep", "event"])
def test_a_step_that_would_block_forever_times_out_and_fails_the_run_as_a_timeout(bench, how):
    handle = bench.client.run("stuck-step", {"how": how, "timeout_s": 0.5})
    with pytest.raises(RunFailedError) as failure:
        handle.result(timeout=30)
    assert failure.value.error["kind"] == "timeout" and "Step timed out: forever" in failure.value.error["message"]
    [step] = bench.client.get_steps(handle.id)
    assert step.name == "forever" and step.status == "failed" and step.error["kind"] == "timeout"
    bench.still_serves()


def test_a_10_mb_input_runs(bench, report):
    blob = "é" * (5 * 1024 * 1024)  # 10 MiB of UTF-8
    began = time.monotonic()
    output = bench.client.run("measure", {"blob": blob}).result(timeout=60)
    report(f"a 10 MiB input: enqueued, run and finished in {time.monotonic() - began:.2f}s")
    assert output == {"length": len(blob), "sha256": hashlib.sha256(blob.encode()).hexdigest()}
    bench.still_serves()
