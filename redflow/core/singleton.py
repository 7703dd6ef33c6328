"""Singleton and debounce: at most one unfinished run per key, or calls collapsed into one run.

Both are decided in Redis, in the script that creates the run
(``store/lua/enqueue_run.lua``), so that two clients enqueueing the same key
at once never both create a run:

- :class:`Singleton`: the key (``Keys.singleton``) holds the id of the one
  unfinished (scheduled, queued or running) run; ``on_conflict="skip"``
  returns that run, ``"replace"`` cancels it and enqueues the new one.
- :class:`Debounce`: the window (``Keys.debounce``) names the run that is still
  scheduled; a call within it moves the run's due time to ``period`` after this
  call (never past ``max_wait`` after the first) and gives it this call's input.

Invariant: a singleton key is held iff its run is unfinished; a debounce window
exists iff its run is still scheduled (both let go by the script that ends the
run, promotes it, cancels it or purges it; a key naming a finished, promoted or
deleted run counts as free). No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from redflow.core import codec
from redflow.core.errors import RedflowError

#: ``KeyClaim.mode``: Singleton's on_conflict values, and a debounce.
SKIP = "skip"
REPLACE = "replace"
DEBOUNCE = "debounce"
ON_CONFLICT = (SKIP, REPLACE)
#: The cancel reason of a run a singleton's ``on_conflict="replace"`` replaced.
REPLACED_REASON = "replaced by a newer run of its singleton key"

KeyFunction = Callable[[Any], Any]


def _check_key(key: Any, what: str) -> None:
    if callable(key):
        return
    if not isinstance(key, str) or not key:
        raise RedflowError(f"{what}: key must be a function of the input or a non-empty string, got {key!r}")


def _seconds_ms(value: Any, what: str) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise RedflowError(f"{what} must be a finite number of seconds > 0 (or a timedelta), got {value!r}")
    return max(1, int(round(seconds * 1000)))


@dataclass(frozen=True, slots=True)
class Singleton:
    """At most one unfinished run per ``key`` (a function of the input, or one string
    for the whole workflow); ``on_conflict``: ``"skip"`` (``client.run`` returns the
    existing run) or ``"replace"`` (the existing run is canceled, the new one enqueued)."""

    key: KeyFunction | str
    on_conflict: str = SKIP

    def __post_init__(self) -> None:
        _check_key(self.key, "Singleton")
        if self.on_conflict not in ON_CONFLICT:
            raise RedflowError(f"Singleton: on_conflict must be 'skip' or 'replace', got {self.on_conflict!r}")


@dataclass(frozen=True, slots=True)
class Debounce:
    """Runs enqueued for the same ``key`` within ``period`` seconds of each other collapse
    into one run, started ``period`` after the last call (never later than ``max_wait``
    after the first) with the last call's input. ``key``: a function of the input, a
    string, or None (one window for the whole workflow)."""

    period: float | timedelta
    key: KeyFunction | str | None = None
    max_wait: float | timedelta | None = None

    def __post_init__(self) -> None:
        period_ms = _seconds_ms(self.period, "Debounce: period")
        if self.key is not None:
            _check_key(self.key, "Debounce")
        if self.max_wait is not None and _seconds_ms(self.max_wait, "Debounce: max_wait") < period_ms:
            raise RedflowError(f"Debounce: max_wait ({self.max_wait!r}) must be at least the period ({self.period!r})")

    @property
    def period_ms(self) -> int:
        return _seconds_ms(self.period, "Debounce: period")

    @property
    def max_wait_ms(self) -> int:
        """0: no bound."""
        return 0 if self.max_wait is None else _seconds_ms(self.max_wait, "Debounce: max_wait")


@dataclass(frozen=True, slots=True)
class KeyClaim:
    """What one enqueue asks of a singleton key or a debounce window (``enqueue_run.lua``):
    ``mode`` (:data:`SKIP`, :data:`REPLACE` or :data:`DEBOUNCE`), the Redis key, and a
    debounce's period and max wait in ms (0: none)."""

    mode: str
    redis_key: str
    period_ms: int = 0
    max_wait_ms: int = 0

    @property
    def debounced(self) -> bool:
        return self.mode == DEBOUNCE

    def summary(self) -> str:
        """The run field that says which policy it is under (``singleton`` / ``debounce``)."""
        return f"{self.period_ms}:{self.max_wait_ms or ''}" if self.debounced else self.mode


def delayed_debounce(workflow: str) -> RedflowError:
    """The error of ``delay=`` / ``run_at=`` on a debounced workflow's run."""
    return RedflowError(f"workflow {workflow!r} is debounced: its runs start `period` after the last call (no delay= or run_at=)")


def one_of(name: str, singleton: Any, debounce: Any) -> tuple[Singleton | None, Debounce | None]:
    """``define_workflow``'s singleton= and debounce=, checked: the right types, and not both."""
    if singleton is not None and not isinstance(singleton, Singleton):
        raise RedflowError(f"workflow {name!r}: singleton must be a Singleton(key, on_conflict), got {singleton!r}")
    if debounce is not None and not isinstance(debounce, Debounce):
        raise RedflowError(f"workflow {name!r}: debounce must be a Debounce(period, key, max_wait), got {debounce!r}")
    if singleton is not None and debounce is not None:
        raise RedflowError(f"workflow {name!r}: singleton= and debounce= are exclusive; give one of them")
    return singleton, debounce


def key_value(key: KeyFunction | str | None, input: Any, *, workflow: str, what: str) -> str:
    """The key of one run: ``key(input)`` (a string, or an int), or the constant key."""
    if key is None:
        return ""
    if not callable(key):
        return key
    try:
        value = key(input)
    except _NeedsCode:
        raise
    except Exception as exc:  # the user's function: any error becomes ours, naming it
        raise RedflowError(f"workflow {workflow!r}: its {what} key function failed on the input: {exc!r}") from exc
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise RedflowError(f"workflow {workflow!r}: its {what} key function must return a non-empty string, got {value!r}")
    return value


class _NeedsCode(RedflowError):
    """A workflow known by its metadata only, whose key is a function of the input."""


def metadata_json(singleton: Singleton | None, debounce: Debounce | None) -> str | None:
    """What the workflow's metadata says of its singleton or debounce (``oneRunJson``), so that a
    client enqueueing it by name applies it: a constant key as it is, a key function as ``null``."""
    if singleton is not None:
        key = None if callable(singleton.key) else singleton.key
        return codec.dumps({"singleton": singleton.on_conflict, "key": key})
    if debounce is not None:
        key = None if callable(debounce.key) else debounce.key or ""
        return codec.dumps({"debounceMs": debounce.period_ms, "maxWaitMs": debounce.max_wait_ms, "key": key})
    return None


def of_metadata(raw: str | None, workflow: str) -> Singleton | Debounce | None:
    """A synced ``oneRunJson`` as a policy; a key function the client cannot call (it has
    not the code) is one that refuses every input with an error saying so."""
    spec = codec.try_loads(raw) if raw else None
    if not isinstance(spec, dict):
        return None
    key = spec.get("key")
    if key is None:

        def key(_input: Any) -> Any:
            raise _NeedsCode(
                f"workflow {workflow!r} has a {'singleton' if 'singleton' in spec else 'debounce'} key function: "
                "enqueue it from a client whose registry has its definition"
            )

    try:
        if "singleton" in spec:
            return Singleton(key=key, on_conflict=spec["singleton"])
        max_wait_ms = spec.get("maxWaitMs") or 0
        return Debounce(period=spec["debounceMs"] / 1000, key=key or None, max_wait=max_wait_ms / 1000 if max_wait_ms else None)
    except (KeyError, TypeError, RedflowError):  # written by hand or a newer version: not applied
        return None


def policy_fact(singleton: str | None, debounce: str | None, skipped: int, collapsed: int) -> tuple[str, str] | None:
    """(name, words) ``runs show`` and the run page give a run's singleton or debounce fields."""
    if singleton:
        return "singleton", f"on conflict {singleton}; {skipped} call(s) skipped into this run"
    if debounce:
        period, _, max_wait = debounce.partition(":")
        text = f"starts {_s(period)} after the last call" + (f", at most {_s(max_wait)} after the first" if max_wait else "")
        return "debounce", f"{text}; {collapsed} call(s) collapsed into this run"
    return None


def _s(ms: str) -> str:
    try:
        return f"{int(ms) / 1000:g}s"
    except ValueError:
        return ms
