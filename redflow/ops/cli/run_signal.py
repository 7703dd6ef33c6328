"""``redflow-gevent runs signal <run id> <name> [JSON]``: send a signal to one run.

The signal is kept for the run until its ``step.wait_for_signal(name)`` takes
it (docs/guide/signals.md). Exit 0 when it was stored; 1 when the run has
ended or does not exist (nothing stored) or keeps as many signals as it may;
2 for a payload that is not JSON.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from redflow.client import RedflowClient
from redflow.core import codec
from redflow.core.errors import RedflowError, SerializationError
from redflow.core.signals import check_signal_name
from redflow.ops.cli.common import command, emit
from redflow.ops.cli.values import EXIT_NO, EXIT_OK, argument_type
from redflow.ops.control.runs import signal_run


def register(runs_sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``runs signal`` under ``runs`` (``redflow.ops.cli.runs.register``)."""
    signal = runs_sub.add_parser("signal", parents=[common], help="send a signal to a run (exit 1 if it ended or does not exist)")
    signal.add_argument("run_id")
    signal.add_argument("name", type=argument_type(check_signal_name), help="the signal's name, as the run's wait_for_signal names it")
    signal.add_argument("payload", nargs="?", type=json_value, default=None, help="its payload, as JSON (default: null)")
    signal.set_defaults(func=command(_runs_signal))


def json_value(text: str) -> Any:
    """A payload given on the command line: any JSON text (``'{"by": "ada"}'``, ``42``, ``'"yes"'``)."""
    try:
        value = orjson.loads(text)
        codec.dumps(value)  # nested deeper than it can be stored: refused here too
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}; quote a string as '\"text\"'") from None
    except SerializationError as exc:
        raise argparse.ArgumentTypeError(f"not a payload JSON can store: {exc}") from None
    return value


def _runs_signal(client: RedflowClient, args: argparse.Namespace) -> int:
    try:
        result = signal_run(client, args.run_id, args.name, args.payload)
    except RedflowError as exc:  # a full buffer: nothing stored
        raise RedflowError(f"{args.run_id}: not sent: {exc}") from exc
    emit(args, result, f"{result.run_id}: {result.message}")
    return EXIT_OK if result.ok else EXIT_NO
