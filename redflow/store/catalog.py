"""The Lua scripts: their files, the helpers each needs, their flags, and the library of them.

Each multi-key state change that must be atomic is one script, kept in its
own file under ``store/lua/`` with a header (purpose, the helper files it
``needs``, KEYS, ARGV, returns). :data:`SCRIPT_NAMES` is the one list of
scripts; the helpers a script uses are read from the headers (its own
``(needs a.lua, b.lua)`` and, in turn, its helpers'), so a header is the
one place a dependency is declared. They run as one Redis Functions library
(:mod:`redflow.store.library`: the helpers are defined once per Redis, not
on every call), loaded once per client and again where Redis lost it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

from redflow.store.library import Library

#: Every script, by the name of its file (``store/lua/<name>.lua``).
SCRIPT_NAMES = (
    "enqueue_run",
    "start_run",
    "take_run",
    "settle_run",
    "cancel_run",
    "retry_run",
    "promote_run",
    "unlock",
    "renew_lease",
    "claim_inline",
    "save_step",
    "confirm_run",
    "purge_invalid_entries",
    "reap_run",
    "repair_orphan",
    "watch_run",
    "search_runs",
    "purge_run",
    "heal_limit",
    "ensure_marker",
    "deliver_event",
    "child_ended",
    "forget_waiters",
    "list_child",
    "register_waiter",
    "claim_scheduled_events",
    "schedule_event",
    "append_stream",
    "read_stream",
    "send_signal",
    "take_signal",
    "schedule_save",
    "schedule_tick",
)

#: The helper files in the order the library defines them: each after those it needs.
HELPER_ORDER = (
    "one_per_key", "status", "finalize", "terminal_index", "waits", "limits", "priority", "start", "claim", "owns", "step_records", "clock",
)  # fmt: skip

#: Redis Functions flags (a script without flags may write, and a full Redis
#: refuses it before it runs). ``allow-oom`` goes to the scripts whose first
#: write is always a deletion, which a full Redis allowed as EVAL scripts
#: (settling a run, reaping, purging and unlocking go on at ``maxmemory``:
#: docs/guarantees.md, "A full or evicting Redis"), and to those whose only
#: writes are a few bytes that waits and recovery need (``watch_run``'s
#: waiters flag, ``read_stream``'s streamEnabled, the entry ``repair_orphan`` and ``ensure_marker`` put back);
#: ``no-writes`` to those that only read.
FLAGS: Mapping[str, tuple[str, ...]] = {
    "settle_run": ("allow-oom",),
    "save_step": ("allow-oom",),
    "take_signal": ("allow-oom",),
    "confirm_run": ("allow-oom",),
    "claim_inline": ("allow-oom",),
    "promote_run": ("allow-oom",),
    "reap_run": ("allow-oom",),
    "purge_run": ("allow-oom",),
    "purge_invalid_entries": ("allow-oom",),
    "forget_waiters": ("allow-oom",),
    "claim_scheduled_events": ("allow-oom",),
    "heal_limit": ("allow-oom",),
    "unlock": ("allow-oom",),
    "watch_run": ("allow-oom",),
    "repair_orphan": ("allow-oom",),
    "ensure_marker": ("allow-oom",),
    "search_runs": ("no-writes",),
    "read_stream": ("allow-oom",),
}

_NEEDS = re.compile(r"\(needs ([^)]*)\)")


@cache
def lua(name: str) -> str:
    """The text of ``store/lua/<name>.lua``."""
    return (resources.files("redflow.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def header(name: str) -> str:
    """A Lua file's header: its leading comment lines, without the ``--``."""
    lines = []
    for line in lua(name).splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def needs(name: str) -> tuple[str, ...]:
    """The helper files a Lua file's header says it needs (``(needs a.lua, b.lua)``)."""
    found = _NEEDS.search(header(name))
    return tuple(part.strip().removesuffix(".lua") for part in found.group(1).split(",")) if found else ()


def helpers_of(name: str) -> tuple[str, ...]:
    """Every helper a script uses (what it needs, and what those need), in :data:`HELPER_ORDER`."""
    used: set[str] = set()
    todo = list(needs(name))
    while todo:
        helper = todo.pop()
        if helper not in used:
            used.add(helper)
            todo.extend(needs(helper))
    unknown = used - set(HELPER_ORDER)
    if unknown:
        raise ValueError(f"{name}.lua needs {sorted(unknown)}, which are not helpers (HELPER_ORDER)")
    return tuple(helper for helper in HELPER_ORDER if helper in used)


#: Script name -> the helper files it uses, in :data:`HELPER_ORDER` (from the headers).
SCRIPTS: Mapping[str, tuple[str, ...]] = {name: helpers_of(name) for name in SCRIPT_NAMES}

#: Every script as one library of Redis Functions; each helper only uses helpers defined before it.
LIBRARY = Library(helpers=HELPER_ORDER, scripts=SCRIPTS, flags=FLAGS, read=lua, needs={h: needs(h) for h in HELPER_ORDER})


def script_source(name: str) -> str:
    """The Lua one script runs: its helpers, then its own file (in the library,
    every script shares one definition of each helper)."""
    return "\n".join([*(lua(helper) for helper in SCRIPTS[name]), lua(name)])
