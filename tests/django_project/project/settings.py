"""Settings of the test project: sqlite, the shop app, and redflow as the task backend.

The tests run every process (their own and the workers they start) with
these environment variables: ``REDFLOW_TEST_REDIS_URL`` (the private
redis-server), ``REDFLOW_TEST_PREFIX`` (the test's key prefix) and
``REDFLOW_TEST_DB`` (the sqlite file). ``REDFLOW_TEST_OPTIONS`` (JSON) replaces
the backend's OPTIONS and ``REDFLOW_TEST_QUEUES`` (comma-separated) its QUEUES, for
the tests of other settings.
"""

import json
import os

import django

SECRET_KEY = "redflow-django-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["redflow.contrib.django", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("REDFLOW_TEST_DB", "db.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_OPTIONS = {
    "REDIS_URL": os.environ.get("REDFLOW_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "PREFIX": os.environ.get("REDFLOW_TEST_PREFIX", "redflow-django-test"),
    "MAX_ATTEMPTS": 2,
}
TASKS = {
    "default": {
        "BACKEND": "redflow.contrib.django.RedflowTaskBackend",
        "QUEUES": [q for q in os.environ.get("REDFLOW_TEST_QUEUES", "default,emails").split(",") if q],
        "OPTIONS": json.loads(os.environ["REDFLOW_TEST_OPTIONS"]) if "REDFLOW_TEST_OPTIONS" in os.environ else _OPTIONS,
    },
}
# Another backend, not redflow's: `redflow_worker --backend immediate` is refused.
TASKS["immediate"] = {"BACKEND": f"{'django.tasks' if django.VERSION >= (6,) else 'django_tasks'}.backends.immediate.ImmediateBackend"}
LOGGING = {"version": 1, "disable_existing_loggers": False}
