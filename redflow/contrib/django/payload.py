"""What a Django task call becomes in redflow: the run's input, its priority
and its start time.

Every task runs as a run of one workflow, :data:`WORKFLOW_NAME`, whose input
names the task by its module path (``myapp.tasks.send_email``), as Django's own
``Task.__reduce__`` does, so a worker runs any task it can import: no
registration, no list of task modules to keep in step with the code. The run
is tagged ``task=<module path>``, so ``redflow-gevent runs list --tag task=...``
and the dashboard find the runs of one task.

Arguments and return values are JSON, as Django requires: checked here with
the place of the first value that is not (``args[0]['when'] is a datetime``),
so that a mistake is a clear ``TypeError`` at enqueue, not a run that fails.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from redflow.contrib.django.compat import TASK_MAX_PRIORITY, Task
from redflow.core.flow import MAX_PRIORITY

WORKFLOW_NAME = "django-task"
#: The tag naming a run's task (tag values are at most 200 characters).
TASK_TAG = "task"
MAX_TASK_PATH_CHARS = 200
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson, redflow's JSON, encodes
_JSON_TYPES = "str, int, float, bool, None, and lists and dicts with str keys of those"


def json_value(value: Any, where: str) -> Any:
    """``value`` as JSON data (tuples become lists, UTF-8 bytes strings, as Django's
    ``normalize_json`` does), or a ``TypeError`` saying where the first value that
    JSON cannot carry unchanged is."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise TypeError(f"{where} is an int too large for JSON (64 bits at most): {value}")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{where} is {value}, which JSON cannot carry")
        return value
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise TypeError(f"{where} is bytes that are not UTF-8 text") from None
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{where} has the key {key!r}, a {type(key).__name__}: JSON keys are strings")
        return {key: json_value(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, Sequence):
        return [json_value(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise TypeError(f"{where} is a {type(value).__module__}.{type(value).__qualname__}; a task takes and returns JSON: {_JSON_TYPES}")


def redflow_priority(django_priority: int) -> int:
    """Django's -100..100 onto redflow's 0..9, order kept: 0 and below (Django's
    default and lower) run as redflow's default 0, plain FIFO at no extra cost;
    1..100 spread evenly over 1..9 (1-11 -> 1, 12-22 -> 2, ..., 89-100 -> 9)."""
    if django_priority <= 0:
        return 0
    return int(math.ceil(django_priority * MAX_PRIORITY / TASK_MAX_PRIORITY))


def unix_time(moment: datetime) -> float:
    """A ``run_after`` as unix seconds; a naive one (``USE_TZ = False``) is in Django's current time zone."""
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment.timestamp()


@dataclass(frozen=True, slots=True)
class TaskCall:
    """One enqueued call of a task: the run's input."""

    path: str  # the task's module path
    args: list[Any]
    kwargs: dict[str, Any]
    priority: int  # Django's
    queue_name: str
    run_after: datetime | None

    @classmethod
    def of(cls, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskCall:
        """The call, its arguments checked: a ``TypeError`` naming the task and the bad argument."""
        path = task.module_path
        try:
            values = json_value(list(args), "args"), json_value(dict(kwargs), "kwargs")
        except TypeError as exc:
            raise TypeError(f"task {path}: {exc}") from None
        return cls(path, values[0], values[1], task.priority, task.queue_name, task.run_after)

    def to_input(self) -> dict[str, Any]:
        return {
            "task": self.path,
            "args": self.args,
            "kwargs": self.kwargs,
            "priority": self.priority,
            "queue_name": self.queue_name,
            "run_after": self.run_after.isoformat() if self.run_after else None,
        }

    @classmethod
    def from_input(cls, value: Any) -> TaskCall:
        """The call stored by :meth:`to_input`; ``ValueError`` saying what is wrong."""
        if not isinstance(value, dict) or not isinstance(value.get("task"), str):
            raise ValueError(f"not a Django task call: {str(value)[:200]!r}")
        args, kwargs, run_after = value.get("args"), value.get("kwargs"), value.get("run_after")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError(f"task {value['task']}: args must be a list and kwargs a dict")
        return cls(
            path=value["task"],
            args=args,
            kwargs=kwargs,
            priority=int(value.get("priority") or 0),
            queue_name=str(value.get("queue_name") or "default"),
            run_after=datetime.fromisoformat(run_after) if run_after else None,
        )
