"""A redflow run read back as Django's ``TaskResult``.

What maps onto what (docs/django.md has the table):

- status: ``scheduled`` / ``queued`` -> READY (waiting to start, or to be
  retried), ``running`` -> RUNNING, ``succeeded`` -> SUCCESSFUL, ``failed`` and
  ``canceled`` -> FAILED;
- ``return_value``: the run's output; ``errors``: the run's last error
  (redflow keeps one per run, not one per attempt);
- ``enqueued_at`` / ``started_at`` / ``last_attempted_at`` / ``finished_at``: the
  run's created, started (the latest attempt's), started and finished times;
- ``worker_ids``: one entry per attempt started (so ``attempts`` counts them),
  each :data:`WORKER_LABEL`: redflow does not record which worker ran an attempt.
"""

from __future__ import annotations

import builtins
import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

from redflow.contrib.django.compat import Task, TaskError, TaskResult, TaskResultStatus
from redflow.contrib.django.payload import TaskCall
from redflow.core import errors as redflow_errors
from redflow.core.models import Run

WORKER_LABEL = "redflow-gevent"
STATUSES = {
    "scheduled": TaskResultStatus.READY,
    "queued": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "succeeded": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "canceled": TaskResultStatus.FAILED,
}


def load_task(path: str) -> Task:
    """The task a call names, imported; a clear ``ImportError`` or ``TypeError`` if there is none."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImportError(f"task {path} cannot be imported: {exc}") from exc
    if not isinstance(found, Task):
        raise TypeError(f"{path} is not a task (a function decorated with @task) but a {type(found).__name__}")
    return found


def task_of(call: TaskCall, backend_alias: str) -> Task:
    """The task of ``call`` as it was enqueued (priority, queue, run_after), on ``backend_alias``."""
    return load_task(call.path).using(priority=call.priority, queue_name=call.queue_name, run_after=call.run_after, backend=backend_alias)


def task_result(run: Run, task: Task, call: TaskCall, backend_alias: str) -> TaskResult:
    """``run`` (a run of a task call) as Django's ``TaskResult``."""
    status = STATUSES[run.status]
    result = TaskResult(
        task=task,
        id=run.id,
        status=status,
        enqueued_at=django_time(run.created_at),
        started_at=django_time(run.started_at),
        finished_at=django_time(run.finished_at),
        last_attempted_at=django_time(run.started_at),
        args=call.args,
        kwargs=call.kwargs,
        backend=backend_alias,
        errors=[task_error(run.error)] if run.error else [],
        worker_ids=[WORKER_LABEL] * run.attempt,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", run.output)  # as Django's own backends set it (a frozen dataclass)
    return result


def django_time(unix_s: float | None) -> datetime | None:
    """Unix seconds as Django keeps times: aware UTC with ``USE_TZ``, naive local time without."""
    if unix_s is None:
        return None
    moment = datetime.fromtimestamp(unix_s, tz=UTC)
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def task_error(error: dict[str, Any]) -> TaskError:
    """A run's error JSON (``{name, message, stack?}``) as Django's ``TaskError``."""
    name = str(error.get("name") or "Exception")
    stack = error.get("stack")
    if stack:
        return TaskError(exception_class_path=exception_class_path(name, str(stack)), traceback=str(stack))
    # No traceback: an error redflow recorded itself (a cancel, a deadline), named as in redflow.core.errors.
    path = f"{redflow_errors.__name__}.{name}" if isinstance(getattr(redflow_errors, name, None), type) else builtin_path(name)
    return TaskError(exception_class_path=path, traceback=f"{name}: {error.get('message', '')}")


def exception_class_path(name: str, stack: str) -> str:
    """The dotted path of the exception class named ``name``, read from the last
    line of the traceback that starts with it (Python writes ``module.Class:``
    there, and no module for builtins)."""
    header = re.compile(rf"^((?:\w+\.)*){re.escape(name)}(?::|$)", re.MULTILINE)
    modules = header.findall(stack)
    return f"{modules[-1]}{name}" if modules and modules[-1] else builtin_path(name)


def builtin_path(name: str) -> str:
    """``builtins.<name>`` if there is such an exception, else ``builtins.Exception``
    (a class of ``__main__``'s, which no other process can import)."""
    return f"builtins.{name}" if isinstance(getattr(builtins, name, None), type) else "builtins.Exception"
