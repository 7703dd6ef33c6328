"""Run tags: a few ``str -> str`` pairs a run is filed under (``customer=42``).

Tags are stored on the run as ``tagsJson`` (compact JSON, keys sorted) and
indexed at enqueue, so that runs can be listed, retried and canceled by tag.
Their sizes are bounded: every tag is an index entry, and a tag is meant to
name a customer, a tenant or a deploy, not to carry data.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from redflow.core import codec
from redflow.core.errors import InputValidationError

MAX_TAGS: Final = 10
MAX_KEY_CHARS: Final = 64
MAX_VALUE_CHARS: Final = 200

#: The tags of an untagged run (shared, read-only).
NO_TAGS: Mapping[str, str] = MappingProxyType({})


def check_text(text: Any, what: str, limit: int) -> str:
    """``text`` if it is a non-empty string of at most ``limit`` characters, none a
    control character (a tag, a schedule id: each is an index entry's name)."""
    if not isinstance(text, str):
        raise InputValidationError(f"{what} must be a string, got {type(text).__name__}: {text!r}")
    if not text:
        raise InputValidationError(f"{what} must not be empty")
    if len(text) > limit:
        raise InputValidationError(f"{what} is {len(text)} characters long; at most {limit} are allowed")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InputValidationError(f"{what} must not contain control characters: {text[:40]!r}")
    return text


def validate_tags(tags: Any) -> dict[str, str]:
    """``tags`` checked and copied, keys sorted; :class:`InputValidationError` saying what is wrong.

    At most :data:`MAX_TAGS` pairs; keys of 1..64 characters without ``=``
    (so that ``key=value`` reads back unambiguously on the command line),
    values of 1..200 characters; no control characters."""
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise InputValidationError(f"tags must be a dict of str -> str, got {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise InputValidationError(f"a run has at most {MAX_TAGS} tags, got {len(tags)}")
    out: dict[str, str] = {}
    for key in sorted(tags, key=str):
        check_text(key, "a tag key", MAX_KEY_CHARS)
        if "=" in key:
            raise InputValidationError(f"a tag key must not contain '=': {key!r}")
        out[key] = check_text(tags[key], f"the value of tag {key!r}", MAX_VALUE_CHARS)
    return out


def parse_tag(text: str) -> tuple[str, str]:
    """``"key=value"`` (command line, dashboard) -> ``(key, value)``, checked as :func:`validate_tags` does."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InputValidationError(f"a tag filter is key=value, got {text!r}")
    pair = validate_tags({key: value})
    return key, pair[key]


def tags_json(tags: Mapping[str, str]) -> str:
    """The stored form (``tagsJson``): compact JSON, keys sorted."""
    return codec.dumps(dict(sorted(tags.items())))


def tags_of(raw: str | None) -> Mapping[str, str]:
    """The tags of a stored ``tagsJson``; ``NO_TAGS`` when absent; pairs that are not text are dropped."""
    if not raw:
        return NO_TAGS
    value = codec.try_loads(raw)
    if not isinstance(value, dict):
        return NO_TAGS
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
