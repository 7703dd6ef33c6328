"""``python manage.py redflow_worker -c 50 [-Q default,emails] [--backend default]``:
run the Django tasks of a ``RedflowTaskBackend`` on redflow's gevent worker.

gevent must patch the standard library before Django loads: patched late,
``threading.local`` objects made during set-up (Django's database connections
among them) and sockets already opened are shared by every greenlet, which
breaks the database connections. A management command is imported only
after Django is set up, so when it finds the standard library unpatched it
runs itself again, ``python -m redflow.contrib.django.patched manage.py
redflow_worker ...``, which patches first thing, as gunicorn's gevent worker
patches before it loads the application. A ``manage.py`` that patches first
thing (``from gevent import monkey; monkey.patch_all()``) is run as it is.
"""

from __future__ import annotations

import os
import sys
from argparse import ArgumentParser
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, SystemCheckError, handle_default_options
from gevent import monkey

#: Set for the process the command runs again: if gevent has still not
#: patched there, the command stops instead of running itself once more.
REEXEC_ENV = "REDFLOW_DJANGO_REEXEC"
DEFAULT_BACKEND = "default"


def patched() -> bool:
    """Whether gevent patched sockets and threads (``patch_all(thread=False)``
    would leave every greenlet on one database connection)."""
    return bool(monkey.is_module_patched("socket") and monkey.is_module_patched("threading"))


def run_again_patched(argv: list[str]) -> NoReturn:
    """Replace this process with ``python -m redflow.contrib.django.patched`` running the same command."""
    script = argv[0]
    if not os.path.isfile(script):
        raise CommandError(
            f"gevent must patch before Django loads, and {script!r} is not a script to run again patched: "
            "run `python manage.py redflow_worker`, or call gevent.monkey.patch_all() first thing in the program"
        )
    os.environ[REEXEC_ENV] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    warnings = [f"-W{option}" for option in sys.warnoptions]
    os.execv(sys.executable, [sys.executable, *warnings, "-m", "redflow.contrib.django.patched", script, *argv[1:]])


class Command(BaseCommand):
    help = (
        "Run Django tasks on a redflow gevent worker. Options other than these go to `redflow-gevent worker` "
        "(-c/--concurrency, -Q/--queues, --lease-ms, --grace, --start-timeout, --processes, --metrics-port, "
        "--log-level, --log-format: `redflow-gevent worker --help` lists them); the Redis URL, prefix and app come from TASKS."
    )
    #: The redflow worker's options, for call_command(..., worker_argv=[...]).
    stealth_options = ("worker_argv",)

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--backend", default=DEFAULT_BACKEND, help="the TASKS entry whose tasks to run (default: default)")

    def run_from_argv(self, argv: list[str]) -> None:
        """Django's run_from_argv, except that the options Django does not know are kept for the worker."""
        run_again = os.environ.pop(REEXEC_ENV, None) is None  # not if this process is the one run again
        traceback = "--traceback" in argv
        try:
            if run_again and not patched():
                run_again_patched(argv)
            options, worker_argv = self.create_parser(argv[0], argv[1]).parse_known_args(argv[2:])
            handle_default_options(options)
            self.execute(worker_argv=worker_argv, **vars(options))
        except CommandError as exc:
            if traceback:
                raise
            self.stderr.write(str(exc) if isinstance(exc, SystemCheckError) else f"CommandError: {exc}")
            sys.exit(exc.returncode)

    def handle(self, *args: Any, backend: str = DEFAULT_BACKEND, worker_argv: list[str] | None = None, **options: Any) -> None:
        if not patched():
            raise CommandError(
                "gevent has not patched the standard library: run `python manage.py redflow_worker` "
                "(it runs itself again patched), or call gevent.monkey.patch_all() first thing in the program"
            )
        # Imported only now, patched: redflow's worker command patches when imported.
        from redflow.contrib.django.runner import run_worker

        status = run_worker(backend, worker_argv or [])
        if status:
            raise SystemExit(status)
