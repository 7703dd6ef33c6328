"""The exact key strings and JSON shapes of DATA_MODEL.md (table-driven)."""

import builtins
import hashlib

import orjson
import pytest

from redflow.core import codec, cron
from redflow.core.app_scope import scope_queue
from redflow.core.errors import (
    CanceledError,
    InputValidationError,
    NonRetryableError,
    OutputSerializationError,
    TimeoutError,
    UnknownWorkflowError,
    error_to_json,
)
from redflow.core.idempotency import (
    cron_fire_idempotency_key,
    event_run_idempotency_key,
    step_event_idempotency_key,
    step_workflow_idempotency_key,
)
from redflow.core.keys import Keys, enc
from redflow.core.models import step_failed_json, step_running_json, step_succeeded_json
from redflow.registry import CronTrigger
from redflow.store.connection import resolve_prefix

K = Keys("redflow:v1")

KEY_TABLE = [
    (K.workflows(), "redflow:v1:workflows"),
    (K.workflow("send-welcome"), "redflow:v1:workflow:send-welcome"),
    (K.workflow_runs("send-welcome"), "redflow:v1:workflow-runs:send-welcome"),
    (K.runs_created(), "redflow:v1:runs:created"),
    (K.runs_status("queued"), "redflow:v1:runs:status:queued"),
    (K.run("run_1"), "redflow:v1:run:run_1"),
    (K.run_steps("run_1"), "redflow:v1:run:run_1:steps"),
    (K.run_lease("run_1"), "redflow:v1:run:run_1:lease"),
    # the asyncio package's (docs/interop.md)
    (K.run_blobs("run_1"), "redflow:v1:run:run_1:blobs"),
    (K.run_terminal("run_1"), "redflow:v1:run:run_1:terminal"),
    (Keys("p", cluster=True).run_blobs("run_1", "q"), "p:{q:q}:run:run_1:blobs"),
    (K.queue_ready("default"), "redflow:v1:q:default:ready"),
    (K.queue_processing("default"), "redflow:v1:q:default:processing"),
    (K.queue_scheduled("default"), "redflow:v1:q:default:scheduled"),
    (K.idempotency("wf", "key:1"), "redflow:v1:idempo:2:wf:5:key:1"),
    (K.cron_def(), "redflow:v1:cron:def"),
    (K.cron_next(), "redflow:v1:cron:next"),
    (K.lock_cron(), "redflow:v1:lock:cron"),
    (K.event_def(), "redflow:v1:event:def"),
    (K.event_index("user.created"), "redflow:v1:event:index:12:user.created"),
    (Keys("myapp:v1:").run("x"), "myapp:v1:run:x"),
    (enc(""), "0:"),
    (enc("héllo"), "5:héllo"),
    (step_workflow_idempotency_key("run_a", "render", "render-email"), "stepwf:5:run_a:6:render:12:render-email"),
    (step_event_idempotency_key("run_a", "notify", "email.sent"), "stepev:5:run_a:6:notify:10:email.sent"),
    (event_run_idempotency_key("user.created", "k"), "event:12:user.created:1:k"),
    (cron_fire_idempotency_key("cron_auto_x", 1000), "cron:11:cron_auto_x:1000"),
]

#: (app, queue) -> the queue name, as the asyncio package's scope_queue_name gives it.
SCOPED_QUEUES = [
    (("shop", "default"), "shop:default"),
    ((" shop ", " emails "), "shop:emails"),
    (("shop", "shop:emails"), "shop:emails"),
    (("shop", "shops:emails"), "shop:shops:emails"),
    (("shop", None), "shop:default"),
    (("shop", "  "), "shop:default"),
    ((None, "emails"), "emails"),
    (("", None), "default"),
    (("unknown", "emails"), "emails"),
]


@pytest.mark.parametrize(("actual", "expected"), KEY_TABLE)
def test_key_strings_match_the_data_model(actual, expected):
    assert actual == expected


@pytest.mark.parametrize(("app_queue", "expected"), SCOPED_QUEUES)
def test_queues_are_scoped_by_app_as_the_asyncio_package_scopes_them(app_queue, expected):
    assert scope_queue(*app_queue) == expected


@pytest.mark.parametrize("keys", [K, Keys("redflow:v1", cluster=True)], ids=["single", "cluster"])
def test_the_keys_scripts_build_from_a_prefix_are_the_keys_of_keys_py(keys):
    """settle_run, take_run and start_run take the scope and a queue's prefix
    and add these suffixes in Lua (status.lua, settle_run.lua, take_run.lua)."""
    scope, queue = keys.scope("emails"), keys.queue_prefix("emails")
    for status in ("scheduled", "queued", "running", "succeeded", "failed", "canceled"):
        assert scope + "runs:status:" + status == keys.runs_status(status, "emails")
    run = scope + "run:" + "run_1"
    assert [run, run + ":lease", run + ":done", run + ":steps"] == [
        keys.run("run_1", "emails"), keys.run_lease("run_1", "emails"), keys.run_done("run_1", "emails"), keys.run_steps("run_1", "emails")
    ]  # fmt: skip
    assert [queue + "ready", queue + "processing", queue + "scheduled", queue + "prioritized"] == [
        keys.queue_ready("emails"), keys.queue_processing("emails"), keys.queue_scheduled("emails"), keys.queue_prioritized("emails")
    ]  # fmt: skip


def test_prefix_resolution_explicit_then_env_then_default(monkeypatch):
    monkeypatch.delenv("REDFLOW_PREFIX", raising=False)
    assert resolve_prefix(None) == "redflow:v1"
    monkeypatch.setenv("REDFLOW_PREFIX", "")
    assert resolve_prefix(None) == "redflow:v1"
    monkeypatch.setenv("REDFLOW_PREFIX", "env:v1")
    assert resolve_prefix(None) == "env:v1"
    assert resolve_prefix("explicit") == "explicit"


STEP_JSON_TABLE = [
    (step_running_json(1, 1000), '{"status":"running","seq":1,"startedAt":1000}'),
    (
        step_succeeded_json(2, 1000, 1005, '{"a":1}'),
        '{"status":"succeeded","seq":2,"startedAt":1000,"finishedAt":1005,"outputJson":"{\\"a\\":1}"}',
    ),
    (
        step_failed_json(3, 1000, 1005, '{"name":"Error"}'),
        '{"status":"failed","seq":3,"startedAt":1000,"finishedAt":1005,"errorJson":"{\\"name\\":\\"Error\\"}"}',
    ),
]


@pytest.mark.parametrize(("actual", "expected"), STEP_JSON_TABLE)
def test_step_json_matches_the_data_model(actual, expected):
    assert actual == expected


ERROR_KIND_TABLE = [
    (CanceledError(), "CanceledError", "canceled"),
    (TimeoutError("slow"), "TimeoutError", "timeout"),
    (OutputSerializationError("x"), "OutputSerializationError", "serialization"),
    (UnknownWorkflowError("nope"), "UnknownWorkflowError", "unknown_workflow"),
    (InputValidationError("bad"), "InputValidationError", "validation"),
    (NonRetryableError("stop"), "NonRetryableError", "non_retriable"),
    (ValueError("plain"), "ValueError", "error"),
]


@pytest.mark.parametrize(("err", "name", "kind"), ERROR_KIND_TABLE)
def test_error_json_has_name_message_kind(err, name, kind):
    as_json = error_to_json(err)
    assert as_json == {"name": name, "message": str(err), "kind": kind}


def test_error_json_carries_the_stack_of_a_raised_error():
    try:
        raise ValueError("boom")
    except ValueError as exc:
        as_json = error_to_json(exc)
    assert as_json["name"] == "ValueError" and "boom" in as_json["stack"] and "Traceback" in as_json["stack"]


def test_redflow_timeout_error_is_also_the_builtin():
    assert issubclass(TimeoutError, builtins.TimeoutError)


def test_json_is_compact_utf8_and_reads_the_typescript_undefined_token():
    assert codec.dumps({"a": [1, None], "é": "ü"}) == '{"a":[1,null],"é":"ü"}'
    assert codec.loads("__redflow_undefined_raw__:v1") is None
    assert codec.dumps(float("nan")) == "null"


def _sha24(obj):
    return hashlib.sha256(orjson.dumps(obj)).hexdigest()[:24]


def test_cron_ids_are_the_data_model_hashes():
    auto = CronTrigger(expression="*/5 * * * *", timezone="UTC", input={"x": 1})
    expected_auto = "cron_auto_" + _sha24({"workflowName": "wf", "expression": "*/5 * * * *", "timezone": "UTC", "input": {"x": 1}})
    assert cron.cron_trigger_id("wf", auto) == expected_auto
    no_input = CronTrigger(expression="0 * * * *")
    assert cron.cron_trigger_id("wf", no_input) == "cron_auto_" + _sha24(
        {"workflowName": "wf", "expression": "0 * * * *", "timezone": None}
    )
    declared = CronTrigger(expression="0 * * * *", id="nightly")
    assert cron.cron_trigger_id("wf", declared) == "cron_user_" + _sha24({"workflowName": "wf", "userId": "nightly"})


def test_six_field_cron_expressions_have_seconds_first():
    after = 1_700_000_000_000  # a whole second
    assert cron.next_fire_ms("*/10 * * * * *", None, after) - after <= 10_000
    assert cron.next_fire_ms("0 0 * * *", "UTC", after) % 86_400_000 == 0
