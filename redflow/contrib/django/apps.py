"""The Django app: ``"redflow.contrib.django"`` in INSTALLED_APPS gives the
``redflow_worker`` command and turns on the backend's system checks."""

from __future__ import annotations

from importlib import import_module

from django.apps import AppConfig

from redflow.contrib.django.compat import CHECKS_MODULE


class RedflowConfig(AppConfig):
    name = "redflow.contrib.django"
    label = "redflow"
    verbose_name = "redflow"

    def ready(self) -> None:
        # Django runs a task backend's check() from the tasks framework's own
        # system check, registered when the framework's checks module is imported.
        import_module(CHECKS_MODULE)
