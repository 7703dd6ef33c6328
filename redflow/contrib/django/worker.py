"""What the worker runs: ``-A redflow.contrib.django.worker:registry``.

``manage.py redflow_worker`` hands this to redflow's worker command, whose
``--processes N`` starts N ``redflow-gevent worker`` processes with the same
arguments: each imports this module with Django not yet set up, so reading
``registry`` sets Django up (``DJANGO_SETTINGS_MODULE`` comes from the
environment, which the command's own process passes on) after the worker
command has patched gevent.

The backend whose tasks to run is named by ``REDFLOW_DJANGO_BACKEND``
(default ``default``), also set by the command.
"""

from __future__ import annotations

import os
from typing import Any

import django
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from redflow.contrib.django.backend import RedflowTaskBackend
from redflow.contrib.django.compat import task_backends
from redflow.registry import Registry

BACKEND_ENV = "REDFLOW_DJANGO_BACKEND"
DEFAULT_BACKEND = "default"


def __getattr__(name: str) -> Any:
    if name == "registry":
        return backend_registry(os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backend_registry(alias: str) -> Registry:
    """The registry of the workflow that runs ``alias``'s tasks, Django set up first."""
    if not apps.ready:
        if not os.environ.get("DJANGO_SETTINGS_MODULE"):
            raise ImproperlyConfigured("DJANGO_SETTINGS_MODULE is not set: start the worker with `python manage.py redflow_worker`")
        django.setup()
    backend = redflow_backend(alias)
    registry = backend.workflow.registry
    assert registry is not None  # define_workflow registered it
    return registry


def redflow_backend(alias: str) -> RedflowTaskBackend:
    """``TASKS[alias]``'s backend; ``ImproperlyConfigured`` when it is missing or not redflow's."""
    if alias not in task_backends.settings:
        raise ImproperlyConfigured(f"TASKS has no backend {alias!r} (it has {', '.join(sorted(task_backends.settings))})")
    backend = task_backends[alias]
    if not isinstance(backend, RedflowTaskBackend):
        raise ImproperlyConfigured(
            f'TASKS["{alias}"] is {type(backend).__module__}.{type(backend).__name__}, not redflow.contrib.django.RedflowTaskBackend'
        )
    return backend
