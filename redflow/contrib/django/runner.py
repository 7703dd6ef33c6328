"""``manage.py redflow_worker``'s work, once gevent has patched: redflow's
own ``worker`` command with the backend's settings.

Every option the command does not know itself goes to ``redflow-gevent
worker`` unchanged (``-c``, ``-Q``, ``--lease-ms``, ``--grace``,
``--processes``, ``--metrics-port``, ``--log-level``...), which checks it;
``-A``, ``--redis-url``, ``--prefix`` and ``--app-name`` come from ``TASKS``,
so they are refused. The Redis URL, prefix and app go through the environment
(``REDIS_URL``, ``REDFLOW_PREFIX``, ``REDFLOW_APP``), not the command line, so
that a password in the URL does not show in ``ps``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from redflow.contrib.django import worker
from redflow.ops import cli

#: What the worker imports (see redflow/contrib/django/worker.py).
WORKER_APP = f"{worker.__name__}:registry"
_FROM_SETTINGS = {"app": "-A", "redis_url": "--redis-url", "prefix": "--prefix", "app_name": "--app-name"}


def run_worker(alias: str, worker_argv: Sequence[str]) -> int:
    """Run redflow's worker on ``TASKS[alias]`` until it stops; its exit status."""
    try:
        backend = worker.redflow_backend(alias)
        config = backend.usable_config
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from None
    given = cli.parse_args(["worker", *worker_argv])  # a bad option ends here, as `redflow-gevent worker` would
    for name, flag in _FROM_SETTINGS.items():
        if getattr(given, name) is not None:
            raise CommandError(f"{flag}: the worker takes it from TASKS[{alias!r}] (OPTIONS REDIS_URL, PREFIX and APP)")
    queues = [] if given.queues else ["-Q", ",".join(backend.worker_queues())]
    if queues == ["-Q", ""]:
        raise CommandError(f'TASKS["{alias}"] allows any queue (QUEUES is empty): name the queues to serve with -Q')
    os.environ[worker.BACKEND_ENV] = alias
    os.environ["REDIS_URL"] = config.redis_url
    if config.prefix:
        os.environ["REDFLOW_PREFIX"] = config.prefix
    if config.app:
        os.environ["REDFLOW_APP"] = config.app
    return cli.main(["worker", "-A", WORKER_APP, *queues, *worker_argv])
