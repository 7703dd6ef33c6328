"""What every command that reads or changes Redis shares: its connection
options, a client for them, errors as exit codes, and its output (a text
table, or JSON with ``--json`` for scripts)."""

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
from redflow.registry import Registry
from redflow.store.connection import redacted_url, resolve_prefix, resolve_url

#: What the command's exit status says: done; the command ran and the answer
#: is no (a run that already ended, no such run, a bench regression); it could
#: not run as asked (a misplaced option, a bad value, an unreachable or refusing
#: Redis, a start-up error); the reader of its output went away (``| head``).
EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_CLOSED_OUTPUT = 0, 1, 2, 141


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


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
    """Run ``fn`` with a client; Redis and data errors become a message and an exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            client = connect(args)
        except ValueError as exc:  # redis-py's word on a malformed URL
            print(f"error: bad Redis URL {redacted_url(resolve_url(args.redis_url))}: {exc}", file=sys.stderr)
            return 2
        try:
            return fn(client, args)
        except RedisError as exc:
            print(f"error: Redis at {redacted_url(resolve_url(args.redis_url))}: {exc}", file=sys.stderr)
            return 2
        except RedflowError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
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
