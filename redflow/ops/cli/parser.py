"""The ``redflow-gevent`` command line: the top parser, the options every command
takes (logging; a connection given before the command), and :func:`main`.

The worker command is :mod:`redflow.ops.cli.worker`; the others are the
modules of :data:`COMMAND_MODULES`, each adding its parser with ``register``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from redflow.ops.cli import worker
from redflow.ops.cli.values import EXIT_CLOSED_OUTPUT, EXIT_RULE
from redflow.ops.observe.logs import setup_logging

#: Modules adding a sub-command: each has ``register(subparsers)``, which adds
#: its parser and sets ``func`` (called with the parsed args, returns the exit code).
#: Each is imported on its own, so that one that fails to import leaves the others working.
COMMAND_MODULES: tuple[str, ...] = (
    "redflow.ops.cli.runs", "redflow.ops.cli.queues", "redflow.ops.cli.cron", "redflow.ops.cli.workers", "redflow.ops.cli.stats",
    "redflow.ops.cli.dashboard", "redflow.bench.command", "redflow.ops.cli.schedules",
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


def _command_paths(parser: argparse.ArgumentParser, above: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command parser under ``parser`` by its words (``runs`` and ``runs list`` both)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                path = f"{above} {name}".strip()
                found[path] = child
                found.update(_command_paths(child, path))
    return found


def _command_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every command parser under ``parser``, each once."""
    return list({id(p): p for p in _command_paths(parser).values()}.values())


def _misplaced_option(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """What is wrong with an option before the command that only a command takes
    (``redflow-gevent -c 500 worker``), which argparse would misread as a bad
    command (``invalid choice: '500'``); None when the options before it are the top parser's."""
    index = 0
    while index < len(argv) and argv[index].startswith("-") and argv[index] not in ("-", "--"):
        name, has_value = argv[index].partition("=")[0], "=" in argv[index]
        action = _top_option(parser, name)
        if action is None:
            return _where_it_goes(parser, argv, index)
        index += 1 if has_value or action.nargs == 0 else 2
    return None


def _top_option(parser: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    """The top parser's option ``name`` (or the one long option it abbreviates, as argparse allows)."""
    options = parser._option_string_actions
    if name in options:
        return options[name]
    matches = {id(a): a for option, a in options.items() if name.startswith("--") and option.startswith(name)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def _where_it_goes(parser: argparse.ArgumentParser, argv: Sequence[str], index: int) -> str:
    """Where an option the top parser does not know, placed before the command, belongs."""
    token = argv[index]
    name = token.partition("=")[0]
    name = name if name.startswith("--") else name[:2]  # -c500
    paths = _command_paths(parser)
    typed = max((path for path in paths if _contains(argv[index + 1 :], path.split())), key=len, default=None)
    if typed is not None and name in paths[typed]._option_string_actions:
        alone = token != name or paths[typed]._option_string_actions[name].nargs == 0  # --opt=value, -c500, a flag
        moved = " ".join(argv[index : index + (1 if alone else 2)])
        return f"{name} is an option of the {typed} command: put it after the command, as in: redflow-gevent {typed} {moved} ..."
    owners = sorted(path for path, p in paths.items() if name in p._option_string_actions)
    if owners:
        return f"{name} is an option of {', '.join(owners)}, not of {typed or 'redflow-gevent itself'}"
    return f"unrecognized option {token} before the command (see 'redflow-gevent --help')"


def _contains(argv: Sequence[str], words: list[str]) -> bool:
    return any(list(argv[i : i + len(words)]) == words for i in range(len(argv)))


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
        epilog=f"{_SYNOPSIS}\n\n{EXIT_RULE}",
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
    misplaced = _misplaced_option(parser, sys.argv[1:] if argv is None else argv)
    if misplaced:
        parser.error(misplaced)
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
        _output_closed()
    return code


def _output_closed() -> NoReturn:
    """The reader of stdout went away (``redflow-gevent runs list | head``): no
    traceback; the status of a command that SIGPIPE stopped, as a C tool's.

    The command's work is done (its client closed), so the process ends here,
    without the interpreter's teardown: after an EPIPE on stdout that teardown
    was seen to spin in the garbage collector, one exit in five to eight."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(EXIT_CLOSED_OUTPUT)
