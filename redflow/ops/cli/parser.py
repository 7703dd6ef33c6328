"""The ``redflow-gevent`` command line: the top parser, the options every command
takes (logging; a connection given before the command), and :func:`main`.

The worker command is :mod:`redflow.ops.cli.worker`; the others are the
modules of :data:`COMMAND_MODULES`, each adding its parser with ``register``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from redflow.ops.cli import worker
from redflow.ops.cli.common import EXIT_CLOSED_OUTPUT
from redflow.ops.observe.logs import setup_logging

#: Modules adding a sub-command: each has ``register(subparsers)``, which adds
#: its parser and sets ``func`` (called with the parsed args, returns the exit code).
#: Each is imported on its own, so that one that fails to import leaves the others working.
COMMAND_MODULES: tuple[str, ...] = (
    "redflow.ops.cli.runs", "redflow.ops.cli.queues", "redflow.ops.cli.cron", "redflow.ops.cli.workers", "redflow.ops.cli.stats",
    "redflow.ops.cli.dashboard", "redflow.bench.command",
)  # fmt: skip


LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
#: Options that go before or after the command, as in ``redflow-gevent worker -A app --log-format json``.
_SYNOPSIS = """\
options go before or after the command; these are the same:
  redflow-gevent --log-level debug worker -A myapp.workflows
  redflow-gevent worker -A myapp.workflows --log-level debug
  redflow-gevent --redis-url redis://host:6379/0 queues
  redflow-gevent queues --redis-url redis://host:6379/0
'redflow-gevent COMMAND --help' lists the options of a command."""


def _logging_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``--log-level`` and ``--log-format``: defaults on the top parser only, so
    that a command's parser (parsed last) overrides them only when given."""
    group = parser.add_argument_group("logging (before or after the command)")
    group.add_argument("--log-level", choices=LOG_LEVELS, default="info" if top else argparse.SUPPRESS, help="default info")
    group.add_argument("--log-format", choices=LOG_FORMATS, default="text" if top else argparse.SUPPRESS, help="default text")


def _connection_options_before(parser: argparse.ArgumentParser) -> None:
    """``--redis-url`` and ``--prefix`` before the command, for the commands that take them after it."""
    group = parser.add_argument_group("connection (before or after the command, for the commands that take them)")
    group.add_argument(
        "--redis-url", dest="early_redis_url", metavar="URL", default=None, help="default: $REDIS_URL or redis://127.0.0.1:6379/0"
    )
    group.add_argument(
        "--prefix", dest="early_prefix", metavar="PREFIX", default=None, help="key prefix (default: $REDFLOW_PREFIX or redflow:v1)"
    )


def _command_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every command parser under ``parser`` (``runs`` and ``runs list`` both), each once."""
    found: dict[int, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if id(child) not in found:
                    found[id(child)] = child
                    found.update((id(p), p) for p in _command_parsers(child))
    return list(found.values())


def _merge_early_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Give ``--redis-url`` / ``--prefix`` placed before the command to the command
    (one placed after it wins); a command that takes no such option says so."""
    for name in ("redis_url", "prefix"):
        early = getattr(args, f"early_{name}")
        delattr(args, f"early_{name}")
        if early is None:
            continue
        if not hasattr(args, name):
            parser.error(f"the {args.command} command takes no --{name.replace('_', '-')}")
        if getattr(args, name) is None:
            setattr(args, name, early)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="redflow-gevent",
        description="Durable Redis-backed workflows with a gevent worker.",
        epilog=_SYNOPSIS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _logging_options(parser, top=True)
    _connection_options_before(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    worker.register(sub)
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(name).register(sub)
        except Exception as exc:  # one broken optional command must not take `worker` down with it
            print(f"redflow-gevent: the commands of {name} are unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    for command in _command_parsers(parser):
        if "--log-level" not in command._option_string_actions:
            _logging_options(command, top=False)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with the options placed before the command handed to it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _merge_early_options(parser, args)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what `worker --processes N` runs again
    setup_logging(args.log_level, args.log_format)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe can be caught, not at exit
    except BrokenPipeError:
        return _output_closed()
    return code


def _output_closed() -> int:
    """The reader of stdout went away (``redflow-gevent runs list | head``): no
    traceback, and nothing left to flush at exit (stdout now goes nowhere);
    the status of a command that SIGPIPE stopped, as a C tool's would be."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_CLOSED_OUTPUT
