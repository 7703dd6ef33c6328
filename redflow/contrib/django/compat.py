"""Django's tasks framework: ``django.tasks`` (Django 6.0 and later) or its
backport, the ``django-tasks`` package (Django 5.2 LTS). The one place that
knows which; every other module of this package imports the names from here."""

from __future__ import annotations

try:
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import DEFAULT_TASK_QUEUE_NAME, TASK_MAX_PRIORITY, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started

    CHECKS_MODULE = "django.tasks.checks"
except ImportError:  # Django < 6.0: the backport (`pip install django-tasks`)
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import DEFAULT_TASK_QUEUE_NAME, TASK_MAX_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

    CHECKS_MODULE = "django_tasks.checks"

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "CHECKS_MODULE",
    "TASK_MAX_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
