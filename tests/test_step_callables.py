"""Which step functions get the run's cancel signal: read from the code object
for plain functions and methods (cached, no ``inspect.signature`` per step),
through ``inspect`` for wrappers, partials and callable objects; both ways must
answer alike."""

from __future__ import annotations

import functools
import inspect

import pytest

from redflow.engine.step import _wants_signal  # noqa: PLC2701 - the rule under test


def by_signature(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in kinds and p.default is inspect.Parameter.empty for p in params) or any(
        p.kind is inspect.Parameter.VAR_POSITIONAL for p in params
    )


class Steps:
    def none(self):
        return 1

    def signal(self, signal):
        return signal

    def defaulted(self, signal=None):
        return signal

    def __call__(self, signal):
        return signal


def wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def no_argument():
    return 1


def one_argument(signal):
    return signal


def keyword_only(*, signal):
    return signal


CALLABLES = {
    "no argument": no_argument,
    "one argument": one_argument,
    "a lambda binding a loop value": lambda i=1: i,
    "a lambda with a signal and a default": lambda signal, i=1: (signal, i),
    "varargs": lambda *args: args,
    "keyword only": keyword_only,
    "a method": Steps().none,
    "a method with a signal": Steps().signal,
    "a method with a defaulted argument": Steps().defaulted,
    "a callable object": Steps(),
    "a partial": functools.partial(lambda a, b: (a, b), 1),
    "a wrapper of no argument": wrapped(no_argument),
    "a wrapper of one argument": wrapped(one_argument),
    "a builtin": len,
}


@pytest.mark.parametrize("fn", CALLABLES.values(), ids=CALLABLES.keys())
def test_the_code_object_answers_as_the_signature_does(fn):
    assert _wants_signal(fn) == by_signature(fn)
