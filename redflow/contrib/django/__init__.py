"""redflow for Django's tasks framework (``django.tasks``, Django 6; the
``django-tasks`` backport on Django 5.2).

    INSTALLED_APPS = [..., "redflow.contrib.django"]
    TASKS = {"default": {
        "BACKEND": "redflow.contrib.django.RedflowTaskBackend",
        "OPTIONS": {"REDIS_URL": "redis://127.0.0.1:6379/0"},
    }}

then ``python manage.py redflow_worker -c 50``. See docs/django.md.

``RedflowTaskBackend`` is imported on first use: Django imports this package
(INSTALLED_APPS) before it is set up, and ``python -m
redflow.contrib.django.patched`` imports it before gevent patches, so
importing it imports neither Django's tasks nor redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["RedflowTaskBackend"]


def __getattr__(name: str) -> Any:
    if name == "RedflowTaskBackend":  # imported on first use: see above
        from redflow.contrib.django.backend import RedflowTaskBackend

        return RedflowTaskBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from redflow.contrib.django.backend import RedflowTaskBackend
