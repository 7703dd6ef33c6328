"""Step records of the asyncio ``redflow`` package (0.0.25 and later): a JSON
array per step (redflow/core/step_arrays.py), read as the object form
(``Step.from_json``, ``step_record``) so that its runs' steps are shown and
replayed. The records below are what redflow 0.1.9's encoders write
(tests/test_interop_redflow019.py checks them against the real package)."""

import orjson
import pytest

from redflow.core import blobs
from redflow.core.models import STEP_UNREADABLE, Step, Unreadable, Wait, step_record, step_seq

RUN = "run_8c1e7c3a-1f2b-4d3c-9a4b-5e6f7a8b9c0d"
ERROR = '{"name":"Error","message":"boom","kind":"error"}'


def test_a_succeeded_array_record_is_a_succeeded_step_with_its_output_seq_and_attempt():
    step = Step.from_json("charge", '[1,1,2,"{\\"a\\":1}","run_child"]')
    assert (step.status, step.seq, step.attempt, step.output, step.error) == ("succeeded", 1, 2, {"a": 1}, None)
    assert step_record('[1,1,2,"{\\"a\\":1}","run_child"]', "step")["childRunId"] == "run_child"


def test_failed_and_canceled_array_records_carry_their_error():
    failed = Step.from_json("a", orjson.dumps([2, 4, 2, ERROR]).decode())
    assert (failed.status, failed.seq, failed.error) == ("failed", 4, {"name": "Error", "message": "boom", "kind": "error"})
    canceled = Step.from_json("b", orjson.dumps([3, 5, 3, '{"name":"CanceledError","message":"Run canceled","kind":"canceled"}']).decode())
    assert (canceled.status, canceled.seq, canceled.attempt, canceled.error["kind"]) == ("canceled", 5, 3, "canceled")


def test_a_running_array_record_keeps_its_start_and_a_wake_time_is_a_sleep():
    running = Step.from_json("a", "[0,1,1,1700000000000]")
    assert (running.status, running.seq, running.started_at, running.wait) == ("running", 1, 1_700_000_000.0, None)
    sleeping = Step.from_json("nap", "[0,2,1,1700000000000,1700000060000]")
    assert sleeping.wait == Wait(kind="sleep", wake_at_ms=1_700_000_060_000)


def test_an_event_wait_of_the_asyncio_package_is_a_running_step_without_a_wait_of_ours():
    step = Step.from_json("paid", '[0,3,2,1700000000000,null,null,{"kind":"event","event":"paid","correlationKey":"o-1"}]')
    assert (step.status, step.seq, step.attempt, step.wait) == ("running", 3, 2, None)


def test_the_seq_of_an_array_record_counts_like_an_objects():
    records = ("[0,7,1,1]", '[1,8,1,"null"]', '{"status":"running","seq":9,"startedAt":1}')
    assert [step_seq(step_record(raw, "step")) for raw in records] == [7, 8, 9]


def test_a_step_output_stored_as_a_blob_reads_through_the_run_blob_hash():
    text = '{"big":"' + "z" * 3000 + '"}'
    stored = blobs.encode(text, 1024)
    assert stored.blob is not None
    raw = f'[1,1,1,"{stored.value}"]'
    assert Step.from_json("a", raw, blobs=dict([stored.blob]), run_id=RUN).output == {"big": "z" * 3000}
    not_read = Step.from_json("a", raw).output
    assert isinstance(not_read, Unreadable) and not_read.raw == stored.value
    missing = Step.from_json("a", raw, blobs={}, run_id=RUN).output
    assert isinstance(missing, Unreadable) and RUN in missing.reason and "step 'a' outputJson" in missing.reason


@pytest.mark.parametrize(
    "raw",
    ["[1,1,1]", '[9,1,1,"null"]', '[true,1,1,"null"]', '[1,0,1,"null"]', '[1,1,false,"null"]', '[0,1,1,"late"]', "[1,1,1,{}]", "[]", "7"],
)
def test_an_array_record_the_asyncio_package_would_refuse_is_an_unreadable_step_not_an_error(raw):
    step = Step.from_json("a", raw)
    assert step.status == STEP_UNREADABLE and isinstance(step.output, Unreadable) and step.output.raw == raw
