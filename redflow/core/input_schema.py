"""A workflow's input schema, as those without its code can check it. No I/O.

``schema=`` is a callable, a pydantic model (anything with ``model_validate``)
or a JSON Schema dict (checked by ``core/json_schema.py``, strictly, in the
client and the worker alike). A worker syncs the input's JSON Schema with
the workflow's metadata (``inputSchemaJson``, the field the asyncio
``redflow`` package writes too) and says how a client that has no code may
check input against it (``inputSchemaCheck``, a redflow-gevent addition):

- ``strict``: a JSON Schema dict: the worker checks exactly that schema.
- ``lax``: a pydantic model: its JSON Schema without the scalar conversions
  pydantic makes (``core/json_schema.py`` says which).
- absent: not at all. A callable has no JSON Schema; a model that changes
  its input before checking it (a ``mode="before"``, ``"wrap"`` or
  ``"plain"`` validator, a custom ``__init__``, a field accepted under
  several names, strings stripped or case-folded, numbers taken as strings)
  accepts input its JSON Schema refuses; and a JSON Schema synced by
  another package says nothing of how its worker checks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redflow.core import codec
from redflow.core.errors import RedflowError
from redflow.core.json_schema import JsonSchema
from redflow.core.json_schema_lint import lint_json_schema

CHECK_STRICT = "strict"
CHECK_LAX = "lax"

#: Types of pydantic-core schemas that run user code on the input before it is checked.
_TRANSFORMING = frozenset({"function-before", "function-wrap", "function-plain"})
#: pydantic-core config and str-schema flags that change the input before it is checked.
_REWRITING_FLAGS = (
    "validate_by_name", "populate_by_name", "str_strip_whitespace", "str_to_lower", "str_to_upper",
    "strip_whitespace", "to_lower", "to_upper", "coerce_numbers_to_str", "custom_init",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SyncedSchema:
    """What a worker stores of a workflow's input schema: the JSON Schema's text
    and how clients may check it (``check``: strict, lax, or None: not at all)."""

    json: str
    check: str | None


def as_schema(schema: Any, *, workflow: str = "") -> Any:
    """``schema=`` as a workflow keeps it: a JSON Schema dict becomes a
    :class:`JsonSchema` (refused here unless every keyword in it is checked);
    anything neither callable nor a model is refused."""
    if schema is None or isinstance(schema, JsonSchema):
        return schema
    if isinstance(schema, Mapping):
        lint_json_schema(schema, workflow=workflow)
        return JsonSchema(schema)
    if not callable(schema) and not hasattr(schema, "model_validate"):
        whose = f"workflow {workflow!r}: " if workflow else ""
        raise RedflowError(f"{whose}schema must be a callable, a pydantic model or a JSON Schema dict, not {schema!r}")
    return schema


def synced_schema(schema: Any) -> SyncedSchema | None:
    """What to sync of ``schema`` (see the module docstring); None when it has no JSON Schema."""
    if isinstance(schema, JsonSchema):
        return SyncedSchema(codec.dumps(schema.document), CHECK_STRICT)
    make = getattr(schema, "model_json_schema", None)
    if not callable(make):
        return None  # a callable: its rules are code
    try:
        document = make(mode="validation")
        text = codec.dumps(document)
    except Exception:  # noqa: BLE001 - the model's own code runs here (json_schema_extra, custom schemas)
        # pydantic raises PydanticInvalidForJsonSchema (a RuntimeError) for a type JSON Schema cannot
        # describe (a Callable field), and a model's hooks may raise anything: a worker must start all
        # the same, so nothing is synced and the worker checks the input.
        return None
    if not isinstance(document, dict):
        return None
    return SyncedSchema(text, CHECK_LAX if describes_every_input(schema) else None)


def describes_every_input(model: Any) -> bool:
    """Whether a pydantic model's JSON Schema (read leniently) admits every input
    the model accepts: no part of its core schema rewrites input before checking it."""
    core = getattr(model, "__pydantic_core_schema__", None)
    if not isinstance(core, Mapping):
        return False  # not pydantic v2, or not built: unknown, so not checked
    stack: list[Any] = [core]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Mapping):
            kind = node.get("type")
            if (isinstance(kind, str) and kind in _TRANSFORMING) or isinstance(node.get("validation_alias"), list):
                return False
            if node.get("validate_by_alias") is False or any(node.get(flag) is True for flag in _REWRITING_FLAGS):
                return False
            stack.extend(value for value in node.values() if isinstance(value, (Mapping, list)))
        elif isinstance(node, list):
            stack.extend(value for value in node if isinstance(value, (Mapping, list)))
    return True


def schema_from_metadata(text: str | None, check: str | None) -> JsonSchema | None:
    """The checker for a synced schema, or None when clients are not to check it
    (no ``inputSchemaCheck``, one this version does not know, or a schema that
    does not parse: the worker checks the input, as before the schema was synced)."""
    if not text or check not in (CHECK_STRICT, CHECK_LAX):
        return None
    document = codec.try_loads(text)
    if not isinstance(document, (dict, bool)):
        return None
    return JsonSchema(document, lax=check == CHECK_LAX)
