"""What every command that reads or changes Redis shares: its connection
options, a client for them, errors as exit codes (the rule of
:mod:`redflow.ops.cli.values`), its output (a text table, or JSON with
``--json`` for scripts), and the change commands of cron triggers and schedules."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from redis.exceptions import RedisError

from redflow.client import RedflowClient, create_client
from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.ops.cli.values import EXIT_NO, EXIT_USAGE
from redflow.registry import Registry
from redflow.store.connection import redacted_url, resolve_prefix, resolve_url


def jsonable(obj: Any) -> Any:
    """Dataclasses (Run, Step, QueueCounts ...) as dicts, in lists and dicts too."""
    if isinstance(obj, list):
        return [jsonable(item) for item in obj]
    if isinstance(obj, dict):
        return {key: jsonable(value) for key, value in obj.items()}
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else obj


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(codec.dumps(jsonable(data)) if args.json else text)


def connect(args: argparse.Namespace) -> RedflowClient:
    """A client for ``--redis-url`` / ``--prefix`` (else ``REDIS_URL`` / ``REDFLOW_PREFIX``)."""
    return create_client(resolve_url(args.redis_url), prefix=resolve_prefix(args.prefix), registry=Registry())


def command(fn: Callable[[RedflowClient, argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn`` with a client; errors become a message and an exit code: a
    command line that makes no sense (``fn`` raises :class:`argparse.ArgumentError`)
    and Redis errors 2, what Redis holds saying no (a :class:`RedflowError`) 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            client = connect(args)
        except ValueError as exc:  # redis-py's word on a malformed URL
            print(f"error: bad Redis URL {redacted_url(resolve_url(args.redis_url))}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            return fn(client, args)
        except argparse.ArgumentError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except RedisError as exc:
            print(f"error: Redis at {redacted_url(resolve_url(args.redis_url))}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except RedflowError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_NO
        finally:
            client.close()

    return run


def connection_options(parser: argparse.ArgumentParser) -> None:
    """``--redis-url`` and ``--prefix``, as on the worker command."""
    parser.add_argument("--redis-url", default=None, help="default: $REDIS_URL or redis://127.0.0.1:6379/0")
    parser.add_argument("--prefix", default=None, help="key prefix (default: $REDFLOW_PREFIX or redflow:v1)")


def common_options() -> argparse.ArgumentParser:
    """The options every inspection command takes: ``--redis-url``, ``--prefix`` and ``--json``."""
    common = argparse.ArgumentParser(add_help=False)
    connection_options(common)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return common


class Change(Protocol):
    """What a change command did (:mod:`redflow.ops.control`'s ``CronChange``, ``ScheduleChange``)."""

    @property
    def ok(self) -> bool: ...
    @property
    def message(self) -> str: ...


def change_commands(
    sub: Any,
    common: argparse.ArgumentParser,
    actions: Iterable[tuple[str, Callable[..., Change], str]],
    *,
    metavar: str,
    id_help: str | None = None,
    resolve: Callable[[RedflowClient, str], str] | None = None,
) -> None:
    """One subcommand per ``(name, fn, help)`` of ``actions``, each taking the id of
    what it changes (``resolve``: from what the operator typed); ``trigger`` also
    takes ``--trigger-id``. Each prints ``<id>: <what it did>`` (or the change as
    JSON) and exits 1 when it changed nothing."""
    for name, fn, text in actions:
        parser = sub.add_parser(name, parents=[common], help=text)
        parser.add_argument("target", metavar=metavar, help=id_help)
        if name == "trigger":
            parser.add_argument("--trigger-id", default=None, help="idempotency: the same id never starts a second run")
        parser.set_defaults(func=command(_change(fn, resolve, triggers=name == "trigger")))


def _change(
    fn: Callable[..., Change], resolve: Callable[[RedflowClient, str], str] | None, *, triggers: bool
) -> Callable[[RedflowClient, argparse.Namespace], int]:
    def handle(client: RedflowClient, args: argparse.Namespace) -> int:
        target = args.target if resolve is None else resolve(client, args.target)
        change = fn(client, target, args.trigger_id) if triggers else fn(client, target)
        emit(args, change, f"{target}: {change.message}")
        return 0 if change.ok else 1

    return handle
