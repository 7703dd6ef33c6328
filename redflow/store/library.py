"""redflow's Lua as one Redis Functions library, loaded once per Redis.

Why functions and not EVALSHA: a script's helpers (status.lua, limits.lua,
...) are ``local function`` definitions at the top of its source, and Redis
runs that source on every EVALSHA, so every call made its helpers' closures
again and left them to Lua's garbage collector. A library runs its source
once, at ``FUNCTION LOAD``: the helpers are made once and every call runs
only its script's own body (11 % fewer instructions in Redis per run of
the settle-and-claim path, counted with callgrind: docs/performance.md).

Each script file stays what it was: its body reads ``KEYS`` and ``ARGV``,
which here are two library locals that the registered function sets before
it runs the body (Redis runs one function at a time, so nothing else sees
them meanwhile).

The library's name and its functions' names carry a hash of its source:
workers of two redflow-gevent versions can share a Redis (a rolling
deploy) without replacing each other's functions, and loading the same
version again changes nothing. A Redis that lost the library (a restart
without persistence, ``FUNCTION FLUSH``, a new cluster master) answers
"Function not found"; :func:`missing_function_as_noscript` turns that
into redis-py's ``NoScriptError``, which every caller already meets by
loading again and sending the call once more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

#: What Redis answers to an FCALL of a function it does not have.
MISSING_FUNCTION = "Function not found"


def missing_function_as_noscript(error: Any) -> Any:
    """``error`` as ``NoScriptError`` when it says the function is not loaded, else unchanged."""
    if isinstance(error, ResponseError) and not isinstance(error, NoScriptError) and str(error) == MISSING_FUNCTION:
        return NoScriptError(MISSING_FUNCTION)
    return error


class Library:
    """The library source (every script of :data:`scripts`, the helpers once) and its name."""

    def __init__(
        self,
        *,
        helpers: Sequence[str],
        scripts: Mapping[str, tuple[str, ...]],
        flags: Mapping[str, tuple[str, ...]],
        read: Callable[[str], str],
        needs: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        for helper, needed in (needs or {}).items():  # a helper may only use helpers defined above it
            later = [h for h in needed if h not in helpers[: helpers.index(helper)]]
            if later:
                raise ValueError(f"helper {helper} needs {later}, which the library's order {tuple(helpers)} defines after it")
        for name, needed in scripts.items():
            unknown = [h for h in needed if h not in helpers]
            if unknown:
                raise ValueError(f"{name}: its helpers {unknown} are not in the library's order {tuple(helpers)}")
            order = [helpers.index(h) for h in needed]
            if order != sorted(order):
                raise ValueError(f"{name}: its helpers {needed} are not in the library's order {tuple(helpers)}")
        body = [
            "local KEYS, ARGV  -- set by each function before its script runs",
            *(read(helper) for helper in helpers),
        ]
        digest = hashlib.sha1("\n".join([*body, *(read(name) for name in scripts), repr(sorted(flags.items()))]).encode()).hexdigest()[:12]
        self.name = f"redflow_{digest}"
        self.functions = {name: f"{self.name}_{name}" for name in scripts}
        for name in scripts:
            body.append(f"local function run_{name}()\n{read(name)}\nend")
            quoted = ", ".join(f"'{flag}'" for flag in flags.get(name, ()))
            body.append(
                f"redis.register_function{{function_name = '{self.functions[name]}', flags = {{{quoted}}},\n"
                f"  callback = function(keys, args) KEYS, ARGV = keys, args; return run_{name}() end}}"
            )
        self.source = "\n".join([f"#!lua name={self.name}", *body])

    def load(self, client: Any) -> None:
        """Load it through a redis-py client (every primary of a cluster)."""
        client.function_load(self.source, replace=True)

    def function(self, script: str) -> LibraryFunction:
        return LibraryFunction(self, script)


class LibraryFunction:
    """One script of the library, called like a redis-py ``Script``:
    ``fn(keys=, args=, client=)`` sends FCALL and, if Redis lost the
    library, loads it and sends the call once more."""

    __slots__ = ("library", "name")

    def __init__(self, library: Library, script: str) -> None:
        self.library = library
        self.name = library.functions[script]

    def command(self, keys: Sequence[Any], args: Sequence[Any]) -> tuple[Any, ...]:
        """The FCALL command, as arguments for a connection's ``execute``."""
        return ("FCALL", self.name, len(keys), *keys, *args)

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = (), client: Any = None) -> Any:
        try:
            return client.fcall(self.name, len(keys), *keys, *args)
        except ResponseError as exc:
            if not isinstance(missing_function_as_noscript(exc), NoScriptError):
                raise
        self.library.load(client)
        return client.fcall(self.name, len(keys), *keys, *args)
