"""Fixtures of the Django tests (a real project: manage.py, sqlite, the shop app).

Each test gets a key prefix of its own: ``TASKS`` is overridden in this
process, and the workers it starts (``manage.py redflow_worker`` as
subprocesses) read it from ``REDFLOW_TEST_PREFIX``. The private redis-server
(redflow's pytest plugin) and the sqlite file last the session.
"""

import os
import tempfile
from pathlib import Path

import django
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from support import Workers

HERE = Path(__file__).parent


def pytest_configure(config):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["REDFLOW_TEST_DB"] = str(Path(tempfile.mkdtemp(prefix="redflow-django-")) / "db.sqlite3")
    django.setup()


@pytest.fixture(scope="session", autouse=True)
def database():
    call_command("migrate", verbosity=0)


def tasks_setting(redis_url, prefix, **options):
    """The project's TASKS, on ``redis_url`` and ``prefix``; ``options`` change OPTIONS."""
    default = dict(settings.TASKS["default"])
    default["OPTIONS"] = {**default["OPTIONS"], "REDIS_URL": redis_url, "PREFIX": prefix, **options}
    return {"default": default}


@pytest.fixture(autouse=True)
def tasks_on_private_redis(redflow_redis_server, redflow_prefix):
    with override_settings(TASKS=tasks_setting(redflow_redis_server.url, redflow_prefix)):
        yield


@pytest.fixture
def worker_env(redflow_redis_server, redflow_prefix):
    """The environment of a subprocess of the project on this test's Redis and prefix."""
    return {**os.environ, "REDFLOW_TEST_REDIS_URL": redflow_redis_server.url, "REDFLOW_TEST_PREFIX": redflow_prefix}


@pytest.fixture
def workers(worker_env, tmp_path):
    started = Workers(worker_env, tmp_path)
    yield started
    started.stop_all()
