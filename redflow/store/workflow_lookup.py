"""Why a workflow name is unknown: where it was looked for, and the known names nearest to it.

A typo (``plcae-order``) and a client pointed at the wrong Redis or prefix
(``REDIS_URL`` or ``REDFLOW_PREFIX`` forgotten) fail the same lookup; the
error tells them apart by naming the Redis (password hidden) and prefix it
searched, the names nearest to the one asked for (difflib, over the names
workers synced and the process's own), or, when nothing is synced there at
all, what to check. The synced names are read only when the error is
raised: a known name costs nothing more.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from redis.exceptions import RedisError

from redflow.core.errors import UnknownWorkflowError
from redflow.core.keys import Keys
from redflow.store.connection import describe_redis

#: At most this many "did you mean" names, each at least this similar (difflib's ratio, ignoring
#: case): a typo is near (``plcae-order``: 0.91), a name that only shares ``-order`` is not (0.7).
SUGGESTIONS = 3
SIMILARITY = 0.75
#: How many synced names the error lists when none is near.
LISTED = 8


def unknown_workflow(redis: Any, keys: Keys, name: str, local_names: Iterable[str]) -> UnknownWorkflowError:
    """The error for ``name``, known neither locally nor from the metadata synced under ``keys``."""
    where = f"this process's registries and the workflows synced to {describe_redis(redis)} under prefix {keys.prefix!r}"
    try:
        synced = sorted(redis.smembers(keys.workflows()))
    except RedisError:  # Redis went away since the lookup: the error still says where it looked
        return UnknownWorkflowError(name, searched=where)
    known = {known.lower(): known for known in sorted({*local_names, *synced}, reverse=True)}
    nearest = difflib.get_close_matches(name.lower(), list(known), n=SUGGESTIONS, cutoff=SIMILARITY)
    suggestions = tuple(known[lowered] for lowered in nearest)
    hint = None
    if not suggestions and not synced:
        hint = (
            "no workflow is synced there at all: is a worker running against this Redis and prefix? "
            "(check REDIS_URL and REDFLOW_PREFIX, or create_client's url= and prefix=)"
        )
    elif not suggestions:
        more = f" and {len(synced) - LISTED} more" if len(synced) > LISTED else ""
        hint = f"synced there: {', '.join(repr(known) for known in synced[:LISTED])}{more}"
    return UnknownWorkflowError(name, searched=where, suggestions=suggestions, hint=hint)
