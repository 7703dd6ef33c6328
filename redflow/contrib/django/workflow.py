"""The workflow that runs Django tasks: its handler imports the task its
input names and calls it, as Django's own ``ImmediateBackend`` does (the
``task_started`` / ``task_finished`` signals, the ``TaskContext`` of a task
with ``takes_context=True``), on a worker slot's greenlet.

Each slot is a greenlet, and gevent's patched ``threading.local`` gives each
its own database connection. As Django does around a request, the handler
closes the connections that are broken or past ``CONN_MAX_AGE`` before and
after each task, so a worker that runs for weeks neither keeps a dead
connection nor hoards them (``CONN_MAX_AGE = 0``, the default: a connection per task).
"""

from __future__ import annotations

from functools import partial
from traceback import format_exception
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, reset_queries

from redflow.contrib.django.compat import TaskContext, TaskError, TaskResultStatus, task_finished, task_started
from redflow.contrib.django.options import BackendOptions
from redflow.contrib.django.payload import WORKFLOW_NAME, TaskCall, json_value
from redflow.contrib.django.results import task_of, task_result
from redflow.core.errors import NonRetryableError
from redflow.registry import Registry, Workflow, define_workflow

if TYPE_CHECKING:
    from redflow.engine.context import WorkflowContext

#: Django's tasks framework has no queue of its own: the workflow's queue
#: matters only to a worker given no ``-Q``, and the command always gives one.
_DEFAULT_QUEUE = "default"


def task_workflow(options: BackendOptions, backend_alias: str) -> Workflow:
    """The workflow a backend enqueues tasks as and its workers run (in a registry of its own)."""
    handler = partial(run_task, backend_alias=backend_alias)
    return define_workflow(
        WORKFLOW_NAME,
        queue=_DEFAULT_QUEUE,
        max_attempts=options.max_attempts,
        retention=options.retention,
        registry=Registry(),
    )(handler)


def run_task(ctx: WorkflowContext, *, backend_alias: str) -> Any:
    """Run the task call in ``ctx.input``; its return value, checked to be JSON, is the run's output."""
    try:
        call = TaskCall.from_input(ctx.input)
        task = task_of(call, backend_alias)
    except (ValueError, ImportError, TypeError) as exc:  # a call no attempt can run: not retried
        raise NonRetryableError(f"run {ctx.run.id}: {exc}") from exc
    run = ctx.client.get_run(ctx.run.id)
    if run is None:  # purged while it started: nothing to report on
        raise NonRetryableError(f"run {ctx.run.id} is gone")
    result = task_result(run, task, call, backend_alias)
    sender = type(task.get_backend())
    close_old_connections()
    reset_queries()
    task_started.send(sender=sender, task_result=result)
    try:
        args = [TaskContext(task_result=result), *call.args] if task.takes_context else call.args
        value = task.call(*args, **call.kwargs)
        output = json_value(value, f"the return value of task {call.path}")
    except Exception as exc:  # told to Django's signal as its ImmediateBackend does; redflow then records it
        error_type = type(exc)
        path = f"{error_type.__module__}.{error_type.__qualname__}"
        result.errors.append(TaskError(exception_class_path=path, traceback="".join(format_exception(exc))))
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        task_finished.send(sender=sender, task_result=result)
        raise
    finally:
        close_old_connections()
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "_return_value", output)
    task_finished.send(sender=sender, task_result=result)
    return output
