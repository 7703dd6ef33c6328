"""``RedflowTaskBackend``: Django's tasks framework on redflow.

    TASKS = {"default": {
        "BACKEND": "redflow.contrib.django.RedflowTaskBackend",
        "QUEUES": ["default", "emails"],              # Django's; the worker's -Q by default
        "OPTIONS": {"REDIS_URL": "redis://127.0.0.1:6379/0", "PREFIX": "myapp:v1"},
    }}

A task enqueued is a run of the ``django-task`` workflow (redflow/contrib/django/payload.py)
in the task's ``queue_name``, with its priority mapped onto redflow's 0..9
and its ``run_after`` as the run's start time; ``get_result`` reads the run
back as a ``TaskResult``. ``python manage.py redflow_worker`` runs them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from redflow.client import RedflowClient, create_client
from redflow.contrib.django.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from redflow.contrib.django.options import BackendOptions, Problem, queue_problems, read_options
from redflow.contrib.django.payload import MAX_TASK_PATH_CHARS, TASK_TAG, WORKFLOW_NAME, TaskCall, redflow_priority, unix_time
from redflow.contrib.django.results import django_time, task_of, task_result
from redflow.contrib.django.workflow import task_workflow
from redflow.registry import Workflow

APP_NAME = "redflow.contrib.django"

#: One client per (Redis URL, prefix, app) for the process. Django makes a backend
#: per thread (and, under gevent, per greenlet): sharing the client keeps one
#: connection pool instead of one per request.
_clients: dict[tuple[str, str | None, str | None], RedflowClient] = {}
_clients_lock = threading.Lock()


def shared_client(options: BackendOptions) -> RedflowClient:
    key = (options.redis_url, options.prefix, options.app)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = create_client(options.redis_url, prefix=options.prefix, app=options.app)
        return client


class RedflowTaskBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = False  # the worker runs tasks on greenlets, not on an event loop
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        # Never raises: bad OPTIONS are reported by check() (manage.py check) and raised on use.
        super().__init__(alias, params)
        self.config, self.problems = read_options(alias, self.options)
        self.problems += queue_problems(alias, self.queues)

    # -- configuration -------------------------------------------------------
    def check(self, **kwargs: Any) -> Iterator[checks.CheckMessage]:
        yield from super().check(**kwargs)
        for problem in self.problems:
            yield checks.Error(problem.message, hint=problem.hint, id=problem.id)
        if not apps.is_installed(APP_NAME):
            yield checks.Warning(
                f'TASKS["{self.alias}"] uses redflow but "{APP_NAME}" is not in INSTALLED_APPS',
                hint=f'add "{APP_NAME}" to INSTALLED_APPS for the redflow_worker command',
                id="redflow.W001",
            )

    @property
    def usable_config(self) -> BackendOptions:
        if self.config is None:
            problem: Problem = self.problems[0]
            raise ImproperlyConfigured(f"{problem.message} ({problem.id}: {problem.hint})")
        return self.config

    @cached_property
    def workflow(self) -> Workflow:
        """The workflow tasks run as; its registry is the worker's (``redflow.contrib.django.worker``)."""
        return task_workflow(self.usable_config, self.alias)

    @property
    def client(self) -> RedflowClient:
        return shared_client(self.usable_config)

    def worker_queues(self) -> list[str]:
        """The queues a worker serves when not told: the backend's ``QUEUES``."""
        return sorted(self.queues)

    # -- Django's API ----------------------------------------------------------
    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        if len(task.module_path) > MAX_TASK_PATH_CHARS:
            raise InvalidTask(f"the module path of a task is at most {MAX_TASK_PATH_CHARS} characters (it tags the task's runs)")
        if not task.queue_name or "," in task.queue_name:
            raise InvalidTask(f"queue {task.queue_name!r}: a queue name is non-empty and has no comma (the worker's -Q)")

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        self.validate_task(task)
        call = TaskCall.of(task, args, kwargs)
        client = self.client
        handle = client.run(
            self.workflow,
            call.to_input(),
            queue=task.queue_name,
            priority=redflow_priority(task.priority),
            run_at=unix_time(task.run_after) if task.run_after is not None else None,
            tags={TASK_TAG: call.path},
        )
        result = TaskResult(
            task=task,
            id=handle.id,
            status=TaskResultStatus.READY,
            enqueued_at=django_time(client.now_ms() / 1000),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=call.args,
            kwargs=call.kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        run = self.client.get_run(result_id) if isinstance(result_id, str) and result_id else None
        if run is None or run.workflow != WORKFLOW_NAME:
            raise TaskResultDoesNotExist(result_id)
        call = TaskCall.from_input(run.input)
        return task_result(run, task_of(call, self.alias), call, self.alias)
