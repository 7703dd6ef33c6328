"""End to end: tasks enqueued here, run by ``manage.py redflow_worker``
subprocesses on the test's private Redis, read back with ``get_result``."""

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings
from shop.models import Thing
from shop.tasks import PaymentError, add, bad_return, charge, hold_connection, introspect, record, send_email
from support import HERE, WAIT_S, TaskResultStatus, Workers, task_backends, wait_finished

CLOCKS_S = 0.05  # Redis's clock and this process's, on one machine: they may differ by a few ms


def test_tasks_run_on_the_worker_and_their_results_read_back(workers):
    results = [add.enqueue(2, b=3), send_email.enqueue("ada@example.com"), introspect.enqueue("x")]
    worker = workers.start("-c", "5")
    for result in results:
        wait_finished(result, workers)
        assert (result.status, result.errors, result.attempts, result.worker_ids) == (
            TaskResultStatus.SUCCESSFUL,
            [],
            1,
            ["redflow-gevent"],
        )
        assert result.enqueued_at <= result.started_at <= result.finished_at
    assert results[0].return_value == 5
    assert results[1].return_value == {"to": "ada@example.com", "subject": "hello"}
    # takes_context: the task saw its own result, running, in a worker gevent had patched
    # (the marker of the process run again patched is not passed on)
    assert results[2].return_value == {
        "label": "x", "id": results[2].id, "attempt": 1, "status": "RUNNING", "patched": True, "run_again_marker": None
    }  # fmt: skip
    assert workers.stop(worker) == 0, workers.logs()  # SIGTERM: a graceful stop


def test_a_failing_task_reports_its_exception_class_and_traceback_after_its_attempts(workers):
    result = charge.enqueue(10)
    workers.start()
    wait_finished(result, workers)
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 2)  # the project's MAX_ATTEMPTS
    [error] = result.errors
    assert error.exception_class is PaymentError
    assert "shop.tasks.PaymentError: card declined for 10" in error.traceback and "in charge\n    raise PaymentError" in error.traceback
    pytest.raises(ValueError, getattr, result, "return_value").match("Task failed")


def test_a_return_value_json_cannot_carry_fails_the_task_with_a_type_error_saying_where(workers):
    result = bad_return.enqueue()
    workers.start()
    wait_finished(result, workers)
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is TypeError
    assert "the return value of task shop.tasks.bad_return has the key 1, a int: JSON keys are strings" in result.errors[0].traceback


def test_tasks_in_flight_on_many_greenlets_never_share_a_database_connection(workers):
    """The invariant behind "patch gevent before Django loads": no two tasks in
    flight in one worker use one database connection (see shop.tasks.hold_connection)."""
    Thing.objects.create(name="held")
    results = [hold_connection.enqueue("held") for _ in range(60)]
    workers.start("-c", "20")
    for result in results:
        wait_finished(result, workers)
        assert result.status == TaskResultStatus.SUCCESSFUL, result.errors[0].traceback
        assert result.return_value == 2


def test_the_same_tasks_fail_on_a_worker_that_gevent_patched_after_django_loaded(worker_env, tmp_path):
    """The control of the test above: why the command patches before Django loads.
    Patched late, the worker either dies in the patch (gevent meets Django's lazy
    objects: Python 3.11) or runs, and Django refuses the connection its greenlets share."""
    Thing.objects.create(name="held late")
    results = [hold_connection.enqueue("held late") for _ in range(20)]
    late = (
        "import django; django.setup(); from django.db import connection; connection.ensure_connection(); "
        "from gevent import monkey; monkey.patch_all(); "
        "from redflow.contrib.django.runner import run_worker; run_worker('default', ['-c', '20'])"
    )
    env = {**worker_env, "DJANGO_SETTINGS_MODULE": "project.settings"}
    workers = Workers(env, tmp_path)
    with open(tmp_path / "late.log", "w+") as log:
        proc = subprocess.Popen([sys.executable, "-c", late], cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + WAIT_S
        try:
            while proc.poll() is None and not all(result.is_finished for result in results):
                assert time.monotonic() < deadline, "the late-patched worker neither died nor finished the tasks"
                time.sleep(0.1)
                for result in results:
                    result.refresh()
        finally:
            workers.stop(proc)
        log.seek(0)
        output = log.read()
    assert TaskResultStatus.SUCCESSFUL not in {result.status for result in results}
    if proc.returncode not in (0, -15):  # died in the patch
        assert "monkey" in output, output
    else:
        assert {result.status for result in results} == {TaskResultStatus.FAILED}, output
        assert "can only be used in that same thread" in results[0].errors[0].traceback


def test_waiting_tasks_start_in_priority_order(workers):
    priorities = [-50, 0, 100, 20, 60, 19]
    results = [record.using(priority=p).enqueue(f"priority {p}") for p in priorities]
    workers.start("-c", "1")
    for result in results:
        wait_finished(result, workers)
    order = list(Thing.objects.filter(name__startswith="priority ").order_by("pk").values_list("name", flat=True))
    # 100, 60 and 20 run first (redflow 9, 6, 2); 19 is redflow 2 too, enqueued after 20;
    # -50 and 0 both run as redflow's default 0, in the order they were enqueued
    assert order == ["priority 100", "priority 60", "priority 20", "priority 19", "priority -50", "priority 0"]


def test_a_worker_serves_the_queues_it_is_given(workers, redflow_client):
    email, sum_ = send_email.enqueue("bob@example.com"), add.enqueue(1, 1)
    workers.start("-Q", "default")
    wait_finished(sum_, workers)
    email.refresh()
    assert (email.status, redflow_client.get_run(email.id).status) == (TaskResultStatus.READY, "queued")
    workers.start("-Q", "emails")
    wait_finished(email, workers)
    assert email.return_value["to"] == "bob@example.com"


def test_a_task_with_run_after_waits_for_its_time(workers, redflow_client):
    run_after = datetime.now(UTC) + timedelta(seconds=3)
    result = add.using(run_after=run_after).enqueue(20, 22)
    assert redflow_client.get_run(result.id).status == "scheduled"
    workers.start()
    wait_finished(result, workers)
    assert result.return_value == 42
    assert result.started_at >= run_after - timedelta(seconds=CLOCKS_S)


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ({"task": "shop.tasks.gone", "args": [], "kwargs": {}}, "task shop.tasks.gone cannot be imported"),
        ({"task": "shop.tasks.PaymentError", "args": [], "kwargs": {}}, "shop.tasks.PaymentError is not a task"),
        ({"task": "shop.tasks.add", "args": {"a": 1}, "kwargs": {}}, "task shop.tasks.add: args must be a list and kwargs a dict"),
    ],
)
def test_a_run_naming_no_task_it_can_run_fails_at_once_saying_why(workers, redflow_client, call, said):
    """Runs written by hand or by an older deploy: the worker fails them without retrying."""
    run_id = redflow_client.run(task_backends["default"].workflow, call).id
    workers.start()
    run = wait_run_finished(redflow_client, run_id, workers)
    assert (run.status, run.attempt, run.error["name"]) == ("failed", 1, "NonRetryableError")
    assert said in run.error["message"]


def wait_run_finished(client, run_id, workers):
    deadline = time.monotonic() + WAIT_S
    while not (run := client.get_run(run_id)).is_terminal:
        assert time.monotonic() < deadline, workers.logs()
        time.sleep(0.05)
    return run


def test_the_worker_runs_with_several_processes(workers):
    results = [add.enqueue(n, n) for n in range(20)]
    worker = workers.start("--processes", "2", "-c", "4")
    assert [wait_finished(result, workers).return_value for result in results] == [2 * n for n in range(20)]
    assert workers.stop(worker) == 0, workers.logs()


def test_manage_py_started_from_another_directory_finds_its_project(workers, tmp_path):
    result = add.enqueue(1, 2)
    workers.start("-c", "2", script=str(HERE / "manage.py"), cwd=tmp_path)
    assert wait_finished(result, workers).return_value == 3


@pytest.mark.parametrize(
    "option", [["-A", "shop.tasks"], ["--redis-url", "redis://elsewhere:6379/0"], ["--prefix", "other"], ["--app-name", "other"]]
)
def test_the_options_that_come_from_tasks_are_refused(workers, option):
    status, output = workers.run(*option)
    assert status == 1 and f"CommandError: {option[0]}: the worker takes it from TASKS['default']" in output


def test_a_bad_worker_option_is_refused_as_redflow_gevent_worker_refuses_it(workers):
    status, output = workers.run("-c", "many")
    assert status == 2 and "argument -c/--concurrency: not an integer: 'many'" in output


def test_an_unknown_backend_is_refused(workers):
    status, output = workers.run("--backend", "nope")
    assert status == 1 and "CommandError: TASKS has no backend 'nope' (it has default, immediate)" in output


def test_a_backend_that_is_not_redflows_is_refused(workers):
    status, output = workers.run("--backend", "immediate")
    assert status == 1 and 'TASKS["immediate"] is' in output and "not redflow.contrib.django.RedflowTaskBackend" in output


def test_a_backend_that_allows_any_queue_needs_the_queues_named(workers):
    status, output = workers.run(env={"REDFLOW_TEST_QUEUES": ""})
    assert status == 1 and "QUEUES is empty): name the queues to serve with -Q" in output


def test_called_in_a_process_gevent_has_not_patched_the_command_refuses():
    with pytest.raises(CommandError, match="gevent has not patched the standard library"):
        call_command("redflow_worker")


def test_a_process_run_again_that_is_still_unpatched_stops_instead_of_running_itself_again(workers):
    status, output = workers.run(env={"REDFLOW_DJANGO_REEXEC": "1"})
    assert status == 1 and "CommandError: gevent has not patched the standard library" in output


def test_a_command_line_that_is_no_script_to_run_again_is_refused_saying_how_to_patch(worker_env):
    code = "from django.core.management import execute_from_command_line; execute_from_command_line(['not-a-file', 'redflow_worker'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=HERE, env={**worker_env, "DJANGO_SETTINGS_MODULE": "project.settings"},
                          capture_output=True, text=True, timeout=WAIT_S)  # fmt: skip
    assert done.returncode == 1
    assert "CommandError: gevent must patch before Django loads, and 'not-a-file' is not a script to run again patched" in done.stderr


def test_an_app_scopes_the_queues_of_the_backend_and_of_its_worker(workers, worker_env, redflow_redis_server, redflow_prefix):
    """OPTIONS APP: tasks wait in "<app>:<queue>", as the asyncio redflow package's apps scope
    queues, and the worker of that backend serves them there (docs/interop.md)."""
    options = {**settings.TASKS["default"]["OPTIONS"], "APP": "shop-app"}
    with override_settings(TASKS={"default": {**settings.TASKS["default"], "OPTIONS": options}}):
        result = add.enqueue(20, 22)
        client = task_backends["default"].client
        assert client.get_run(result.id).queue == "shop-app:default"
        workers.start(env={"REDFLOW_TEST_OPTIONS": json.dumps(options)})
        wait_finished(result, workers)
        assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
