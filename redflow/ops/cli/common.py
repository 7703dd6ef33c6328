"""What every command that reads or changes Redis shares: its connection
options, a client for them, errors as exit codes (the rule of
:mod:`redflow.ops.cli.values`), and its output (a text table, or JSON with
``--json`` for scripts)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

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
