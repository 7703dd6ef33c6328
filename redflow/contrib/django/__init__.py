"""redflow for Django's tasks framework (``django.tasks``, Django 6; the
``django-tasks`` backport on Django 5.2).

    INSTALLED_APPS = [..., "redflow.contrib.django"]
    TASKS = {"default": {
        "BACKEND": "redflow.contrib.django.RedflowTaskBackend",
        "OPTIONS": {"REDIS_URL": "redis://127.0.0.1:6379/0"},
    }}

then ``python manage.py redflow_worker -c 50``. See docs/django.md.

Names are loaded lazily: Django imports this package (INSTALLED_APPS) before
it is set up, and ``python -m redflow.contrib.django.patched`` imports it
before gevent patches, so importing it imports neither Django's tasks nor redis.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "RedflowTaskBackend": "backend",
    "redflow_priority": "payload",
    "WORKFLOW_NAME": "payload",
}

__all__ = ["WORKFLOW_NAME", "RedflowTaskBackend", "redflow_priority"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from redflow.contrib.django.backend import RedflowTaskBackend
    from redflow.contrib.django.payload import WORKFLOW_NAME, redflow_priority
