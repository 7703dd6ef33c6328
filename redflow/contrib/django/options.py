"""The backend's ``OPTIONS``, read once and checked: every mistake is a
:class:`Problem` with a stable id, which Django's system checks report
(``manage.py check``) and which an enqueue on a misconfigured backend raises.

``TASKS["default"]["OPTIONS"]``:

- ``REDIS_URL`` (required): the Redis the web processes and the workers share;
  ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or ``redis+sentinel://``.
- ``PREFIX``: the key prefix (default: ``REDFLOW_PREFIX`` or ``redflow:v1``).
- ``MAX_ATTEMPTS``: attempts per task (default 1: a task that raises fails; Django's
  tasks framework has no retries of its own).
- ``RETENTION``: how long finished results stay readable, as ``define_workflow(retention=...)``
  takes it: seconds, a ``timedelta``, a :class:`redflow.Retention`, or None for ever
  (default: redflow's, 1 day for successes and 7 days for failures).
- ``APP``: an app name scoping the queues, as the asyncio ``redflow`` package's
  apps do (``create_client(app=...)``, docs/interop.md; default: ``REDFLOW_APP``, else none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from redflow.core.errors import RedflowError
from redflow.core.retention import DEFAULT_RETENTION, Retention, retention_of

#: URL schemes redflow connects with (redflow/store/connection.py).
PLAIN_SCHEMES = ("redis", "rediss", "unix")
HOST_LIST_SCHEMES = ("redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel")
KNOWN_OPTIONS = ("REDIS_URL", "PREFIX", "MAX_ATTEMPTS", "RETENTION", "APP")
DEFAULT_MAX_ATTEMPTS = 1


@dataclass(frozen=True, slots=True)
class Problem:
    """One mistake in the settings: ``id`` as Django's checks show it (``redflow.E001``)."""

    id: str
    message: str
    hint: str


@dataclass(frozen=True, slots=True)
class BackendOptions:
    redis_url: str
    prefix: str | None  # None: REDFLOW_PREFIX or redflow:v1
    max_attempts: int
    retention: Retention
    app: str | None = None  # None: REDFLOW_APP, else no app


def read_options(alias: str, options: Any) -> tuple[BackendOptions | None, list[Problem]]:
    """``(options, [])`` when ``options`` (a backend's ``OPTIONS``) are usable, else ``(None, problems)``."""
    where = f'TASKS["{alias}"]["OPTIONS"]'
    if not isinstance(options, Mapping):
        return None, [Problem("redflow.E001", f"{where} must be a dict with REDIS_URL, not {type(options).__name__}",
                              'OPTIONS = {"REDIS_URL": "redis://host:6379/0"}')]  # fmt: skip
    unknown = [
        Problem("redflow.E003", f"{where} has an unknown option {key!r}", f"known options: {', '.join(KNOWN_OPTIONS)}")
        for key in options
        if key not in KNOWN_OPTIONS
    ]
    max_attempts = options.get("MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)
    retention = options.get("RETENTION", DEFAULT_RETENTION)
    found = [
        *unknown,
        _redis_url_problem(options.get("REDIS_URL"), where),
        _prefix_problem(options.get("PREFIX"), where),
        _max_attempts_problem(max_attempts, where),
        _retention_problem(retention, where),
        _app_problem(options.get("APP"), where),
    ]
    problems = [problem for problem in found if problem is not None]
    if problems:
        return None, problems
    return BackendOptions(options["REDIS_URL"], options.get("PREFIX"), max_attempts, retention_of(retention), options.get("APP")), []


def queue_problems(alias: str, queues: Iterable[str]) -> list[Problem]:
    """Queue names the worker's ``-Q`` (comma-separated) cannot name."""
    return [
        Problem("redflow.E007", f'TASKS["{alias}"]["QUEUES"] has {queue!r}, which a worker cannot serve',
                "queue names are non-empty strings without commas (redflow_worker -Q separates them with commas)")
        for queue in sorted(queues, key=str)
        if not isinstance(queue, str) or not queue or "," in queue
    ]  # fmt: skip


def _redis_url_problem(value: Any, where: str) -> Problem | None:
    if value is None or value == "":
        return Problem("redflow.E001", f"{where} has no REDIS_URL", 'add "REDIS_URL": "redis://host:6379/0"')
    hint = f"one of {', '.join(s + '://' for s in PLAIN_SCHEMES + HOST_LIST_SCHEMES)}"
    if not isinstance(value, str):
        return Problem("redflow.E002", f"{where}['REDIS_URL'] must be a string, not {type(value).__name__}", hint)
    try:
        parts = urlsplit(value)
        if parts.scheme not in PLAIN_SCHEMES + HOST_LIST_SCHEMES:
            raise ValueError(f"the scheme is {parts.scheme!r}" if parts.scheme else "it has no scheme")
        if not (parts.path if parts.scheme == "unix" else parts.netloc):
            raise ValueError("it names no socket" if parts.scheme == "unix" else "it names no host")
        if parts.scheme in PLAIN_SCHEMES:
            parts.port  # noqa: B018 - reading it refuses a port that is not a number, as redis-py would at first use
    except ValueError as exc:
        # The URL may hold a password: the message names the mistake, not the URL.
        return Problem("redflow.E002", f"{where}['REDIS_URL'] is not a Redis URL: {exc}", hint)
    return None


def _prefix_problem(value: Any, where: str) -> Problem | None:
    if value is not None and (not isinstance(value, str) or not value):
        return Problem("redflow.E004", f"{where}['PREFIX'] must be a non-empty string, not {value!r}",
                       "leave PREFIX out for REDFLOW_PREFIX or redflow:v1")  # fmt: skip
    return None


def _app_problem(value: Any, where: str) -> Problem | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        return Problem("redflow.E008", f"{where}['APP'] must be a non-empty string, not {value!r}",
                       "leave APP out for REDFLOW_APP or no app")  # fmt: skip
    return None


def _max_attempts_problem(value: Any, where: str) -> Problem | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return Problem("redflow.E005", f"{where}['MAX_ATTEMPTS'] must be an int >= 1, not {value!r}",
                       "1 runs a task once; 3 retries a task that raises twice")  # fmt: skip
    return None


def _retention_problem(value: Any, where: str) -> Problem | None:
    try:
        retention_of(value)
    except RedflowError as exc:
        return Problem("redflow.E006", f"{where}['RETENTION']: {exc}",
                       "seconds, a timedelta, a redflow.Retention, or None to keep results for ever")  # fmt: skip
    return None
