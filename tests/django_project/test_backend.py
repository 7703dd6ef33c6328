"""The backend in the web process: what an enqueue stores, what get_result
reads back before any worker ran, and the input it refuses."""

import asyncio
import math
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from shop.tasks import add, coroutine, send_email
from support import FRAMEWORK, InvalidTask, TaskResultDoesNotExist, TaskResultStatus, default_task_backend, task, task_backends

from redflow import CanceledError, Registry, Retention, define_workflow
from redflow.contrib.django import RedflowTaskBackend
from redflow.contrib.django.payload import WORKFLOW_NAME, redflow_priority, unix_time


def test_the_project_runs_the_tasks_framework_of_its_django_on_redflow():
    assert isinstance(task_backends["default"], RedflowTaskBackend)
    assert type(add).__module__ == f"{FRAMEWORK}.base"


def test_an_enqueued_task_is_a_ready_result_whose_run_holds_the_call(redflow_client):
    result = add.enqueue(2, b=3)
    assert (result.status, result.args, result.kwargs, result.backend) == (TaskResultStatus.READY, [2], {"b": 3}, "default")
    assert result.enqueued_at.tzinfo is not None and result.worker_ids == [] and result.errors == []
    run = redflow_client.get_run(result.id)
    assert (run.workflow, run.queue, run.status, run.tags) == (WORKFLOW_NAME, "default", "queued", {"task": "shop.tasks.add"})
    assert run.input == {
        "task": "shop.tasks.add",
        "args": [2],
        "kwargs": {"b": 3},
        "priority": 0,
        "queue_name": "default",
        "run_after": None,
    }
    again = add.get_result(result.id)
    assert (again.id, again.status, again.args, again.kwargs, again.task.func) == (
        result.id,
        TaskResultStatus.READY,
        [2],
        {"b": 3},
        add.func,
    )
    assert again.enqueued_at == datetime.fromtimestamp(run.created_at, tz=UTC)
    pytest.raises(ValueError, getattr, again, "return_value").match("not finished")


def test_tuples_and_utf8_bytes_become_lists_and_strings_as_django_normalizes_them(redflow_client):
    result = add.enqueue((1, 2), b=b"caf\xc3\xa9")
    assert (result.args, result.kwargs) == ([[1, 2]], {"b": "café"})
    assert redflow_client.get_run(result.id).input["args"] == [[1, 2]]


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        ((datetime.now(UTC),), {}, "args[0] is a datetime.datetime; a task takes and returns JSON"),
        (({1: "one"},), {}, "args[0] has the key 1, a int: JSON keys are strings"),
        (([1, math.nan],), {}, "args[0][1] is nan, which JSON cannot carry"),
        ((2**70,), {}, "args[0] is an int too large for JSON"),
        ((), {"b": {"tags": {"x"}}}, "kwargs['b']['tags'] is a builtins.set"),
        ((b"\xff",), {}, "args[0] is bytes that are not UTF-8 text"),
    ],
)
def test_arguments_that_json_cannot_carry_unchanged_are_refused_naming_the_argument_and_nothing_is_enqueued(
    redflow_client, args, kwargs, said
):
    with pytest.raises(TypeError) as refused:
        add.enqueue(*args, **kwargs)
    assert str(refused.value).startswith(f"task shop.tasks.add: {said}")
    assert redflow_client.list_runs() == []


def test_priority_maps_djangos_minus_100_to_100_onto_redflows_0_to_9_keeping_the_order():
    mapped = [redflow_priority(p) for p in range(-100, 101)]
    assert mapped == sorted(mapped)
    assert {redflow_priority(p) for p in range(-100, 1)} == {0}
    assert [redflow_priority(p) for p in (1, 11, 12, 22, 50, 88, 89, 100)] == [1, 1, 2, 2, 5, 8, 9, 9]


def test_a_tasks_priority_is_its_runs_and_the_default_costs_nothing(redflow_client):
    high = add.using(priority=100).enqueue(1, 1)
    default = add.enqueue(1, 1)
    assert redflow_client.redis.hget(redflow_client.keys.run(high.id), "priority") == "9"
    assert redflow_client.redis.hget(redflow_client.keys.run(default.id), "priority") is None
    assert add.get_result(high.id).task.priority == 100


def test_a_tasks_queue_name_is_its_runs_queue(redflow_client):
    result = send_email.enqueue("ada@example.com")
    assert redflow_client.get_run(result.id).queue == "emails"
    assert (send_email.get_result(result.id).task.queue_name, send_email.get_result(result.id).task.priority) == ("emails", 50)


def test_run_after_is_the_runs_start_time(redflow_client):
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    result = add.using(run_after=later).enqueue(1, 2)
    run = redflow_client.get_run(result.id)
    assert (run.status, run.available_at) == ("scheduled", later.timestamp())
    assert (add.get_result(result.id).status, add.get_result(result.id).task.run_after) == (TaskResultStatus.READY, later)


@override_settings(USE_TZ=False, TIME_ZONE="Europe/Berlin")
def test_a_naive_run_after_is_in_djangos_time_zone():
    assert unix_time(datetime(2030, 1, 1, 12, 0)) == datetime(2030, 1, 1, 11, 0, tzinfo=UTC).timestamp()


def test_async_task_functions_are_refused_when_defined():
    with pytest.raises(InvalidTask, match="does not support async"):
        task(coroutine)


def _a_task_function():
    return None


def test_a_task_whose_module_path_is_too_long_to_tag_its_runs_is_refused_when_defined():
    _a_task_function.__qualname__ = "f" * 200
    with pytest.raises(InvalidTask, match="at most 200 characters"):
        task(_a_task_function)


def test_a_queue_name_with_a_comma_is_refused_when_any_queue_is_allowed():
    tasks = {**settings.TASKS, "default": {**settings.TASKS["default"], "QUEUES": []}}
    with override_settings(TASKS=tasks), pytest.raises(InvalidTask, match="has no comma"):
        add.using(queue_name="a,b")


def test_get_result_of_an_unknown_id_or_of_another_workflows_run_does_not_exist(redflow_client):
    other = define_workflow("not-a-django-task", registry=Registry())(lambda ctx: None)
    run_id = redflow_client.run(other, {}).id
    for result_id in ("run_does-not-exist", "", run_id):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(result_id)


def test_a_backend_with_bad_options_raises_improperly_configured_naming_the_check_when_used():
    tasks = {"default": {**settings.TASKS["default"], "OPTIONS": {"PREFIX": "x"}}}
    with override_settings(TASKS=tasks), pytest.raises(ImproperlyConfigured, match=r"has no REDIS_URL \(redflow.E001"):
        add.enqueue(1, 2)


def test_a_canceled_run_reads_back_as_failed_with_redflows_canceled_error(redflow_client):
    result = add.using(run_after=datetime.now(UTC) + timedelta(hours=1)).enqueue(1, 2)
    assert redflow_client.cancel(result.id, reason="not needed")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is CanceledError


def test_max_attempts_and_retention_are_the_workflows_and_a_task_runs_once_by_default(redflow_client):
    options = {"REDIS_URL": settings.TASKS["default"]["OPTIONS"]["REDIS_URL"], "PREFIX": redflow_client.prefix, "RETENTION": 60}
    with override_settings(TASKS={"default": {**settings.TASKS["default"], "OPTIONS": options}}):
        workflow = task_backends["default"].workflow
        assert (workflow.max_attempts, workflow.retention) == (1, Retention(succeeded=60, failed=60, canceled=60))
        assert redflow_client.get_run(add.enqueue(1, 2).id).max_attempts == 1


def test_the_async_api_enqueues_and_reads_back(redflow_client):
    async def enqueue_and_read():
        result = await add.aenqueue(4, 5)
        return result, await add.aget_result(result.id)

    result, again = asyncio.run(enqueue_and_read())
    assert (again.id, again.status, again.args) == (result.id, TaskResultStatus.READY, [4, 5])
    assert redflow_client.get_run(result.id).tags == {"task": "shop.tasks.add"}
