"""Values on the command line, checked as argparse reads them, and what the
command's exit status says.

One rule for every command: a value the command cannot use is refused before
anything is done, with exit status 2, whether argparse finds it (``-c abc``)
or a check of several options does (``--replay`` without ``--steps``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from redflow.core.errors import RedflowError

#: Done.
EXIT_OK = 0
#: The command ran and the answer is no: a run that already ended (``runs
#: cancel``), no such run, cron trigger or schedule, a regression (``bench --compare``),
#: "no" at a confirmation prompt.
EXIT_NO = 1
#: It could not run as asked: an unknown or misplaced option, a bad value, an
#: unreachable or refusing Redis, a worker's start-up error, a bench that could
#: not measure.
EXIT_USAGE = 2
#: The reader of its output went away (``redflow-gevent runs list | head``),
#: the status of a command that SIGPIPE stopped.
EXIT_CLOSED_OUTPUT = 141

EXIT_RULE = """\
exit status: 0 done; 1 the command ran and the answer is no (a run that already
ended, no such run, cron trigger or schedule, a bench regression); 2 it could
not run as asked (an unknown or misplaced option, a bad value, an unreachable
or refusing Redis, a start-up error); 141 the reader of its output went away
(| head)."""

T = TypeVar("T")


def usage_error(message: str) -> NoReturn:
    """Refuse a command line argparse could not judge alone: one line, exit 2."""
    print(f"redflow-gevent: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def argument_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse ``type``: its :class:`RedflowError` is argparse's
    refusal of the value (exit 2), not an error found later."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except RedflowError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _number(text: str, kind: Callable[[str], T], what: str) -> T:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def positive_int(text: str) -> int:
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _number(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float, "a number")
    if not 0 <= value < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be >= 0 and finite, got {text!r}")
    return value


def port_number(text: str) -> int:
    """A TCP port to listen on: 0 (any free one) to 65535."""
    value = _number(text, int, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


_DURATION_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def duration_s(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1.5h``, ``7d`` or ``2w`` as seconds (>= 0, finite)."""
    value = text.strip().lower()
    unit = _DURATION_UNITS_S.get(value[-1:], 0.0) if value else 0.0
    try:
        seconds = float(value[:-1] if unit else value) * (unit or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 90s, 15m, 1h, 7d)") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"a duration is >= 0 and finite, not {text!r}")
    return seconds
