"""Whether a ``schema={...}`` JSON Schema is one redflow checks completely. No I/O.

A workflow's JSON Schema is checked by redflow's own checker
(``core/json_schema.py``), in the client and in the worker. A keyword it
does not check (``if``, ``contains``, ``dependentRequired`` ...) would let
input through unchecked, and a malformed one would be read differently by
another tool, so such a schema is refused when the workflow is defined,
naming the keyword and where it is (a JSON pointer into the schema).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from redflow.core import codec
from redflow.core.errors import RedflowError, SerializationError
from redflow.core.json_schema import ANNOTATIONS, ASSERTIONS, TYPES, compile_pattern, is_missing, resolve_pointer

Check = Callable[[Any, str, Any], "str | None"]


def lint_json_schema(document: Any, *, workflow: str = "") -> None:
    """:class:`RedflowError` naming the first problem of ``document`` (and ``workflow``), if any."""
    whose = f"workflow {workflow!r}: " if workflow else ""
    try:
        codec.dumps(document, what="schema")
    except SerializationError as exc:
        raise RedflowError(f"{whose}the JSON Schema is not JSON: {exc}") from None
    problem = _schema(document, "#", document)
    if problem is not None:
        raise RedflowError(f"{whose}JSON Schema {problem}")


def _schema(node: Any, path: str, root: Any) -> str | None:
    if isinstance(node, bool):
        return None
    if not isinstance(node, Mapping):
        return f"at {path}: a schema is an object or true/false, not {codec.dumps(node)}"
    for key, value in node.items():
        check = CHECKS.get(key)
        if check is None and key not in ANNOTATIONS:
            return (
                f"at {path}: keyword {key!r} is not one redflow checks; use a callable or a pydantic model "
                f"for it (checked: {', '.join(sorted(ASSERTIONS))})"
            )
        problem = check(value, f"{path}/{key}", root) if check is not None else None
        if problem is not None:
            return problem
    return None


def _each_schema(value: Any, path: str, root: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return f"at {path}: a non-empty list of schemas"
    return next((p for i, sub in enumerate(value) if (p := _schema(sub, f"{path}/{i}", root)) is not None), None)


def _schema_map(value: Any, path: str, root: Any) -> str | None:
    if not isinstance(value, Mapping):
        return f"at {path}: an object of schemas"
    return next((p for name, sub in value.items() if (p := _schema(sub, f"{path}/{_escape(name)}", root)) is not None), None)


def _patterns(value: Any, path: str, root: Any) -> str | None:
    bad = next((name for name in value if compile_pattern(name) is None), None) if isinstance(value, Mapping) else None
    return f"at {path}: {bad!r} is not a regular expression Python can compile" if bad is not None else _schema_map(value, path, root)


def _ref(value: Any, path: str, root: Any) -> str | None:
    if not isinstance(value, str) or not (value == "#" or value.startswith("#/")):
        return f"at {path}: only references inside the schema are followed (#/$defs/Name), not {value!r}"
    target = resolve_pointer(root, value)
    if is_missing(target) or not isinstance(target, (bool, Mapping)):
        return f"at {path}: {value!r} names no schema in this document"
    return None


def _type(value: Any, path: str, root: Any) -> str | None:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(name not in TYPES for name in names) or len(set(names)) != len(names):
        return f"at {path}: a type is one of {', '.join(TYPES)} or a list of them, not {codec.dumps(value)}"
    return None


def _kind_check(test: Callable[[Any], bool], what: str) -> Check:
    def check(value: Any, path: str, root: Any) -> str | None:
        return None if test(value) else f"at {path}: {what}, not {codec.dumps(value)}"

    return check


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


_NUMBER = _kind_check(_is_number, "a number")
_COUNT = _kind_check(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0")
#: How each keyword's value is checked: every keyword of ``ASSERTIONS``, and the annotations that hold schemas.
CHECKS: dict[str, Check] = {
    "$ref": _ref,
    "type": _type,
    "enum": _kind_check(lambda v: isinstance(v, list), "a list of values"),
    "const": lambda value, path, root: None,
    "allOf": _each_schema,
    "anyOf": _each_schema,
    "oneOf": _each_schema,
    "prefixItems": _each_schema,
    "not": _schema,
    "items": _schema,
    "additionalProperties": _schema,
    "propertyNames": _schema,
    "contentSchema": _schema,
    "properties": _schema_map,
    "$defs": _schema_map,
    "definitions": _schema_map,
    "patternProperties": _patterns,
    "multipleOf": _kind_check(lambda v: _is_number(v) and v > 0, "a number > 0"),
    "maximum": _NUMBER,
    "minimum": _NUMBER,
    "exclusiveMaximum": _NUMBER,
    "exclusiveMinimum": _NUMBER,
    "maxLength": _COUNT,
    "minLength": _COUNT,
    "maxItems": _COUNT,
    "minItems": _COUNT,
    "maxProperties": _COUNT,
    "minProperties": _COUNT,
    "pattern": _kind_check(lambda v: isinstance(v, str) and compile_pattern(v) is not None, "a regular expression Python can compile"),
    "uniqueItems": _kind_check(lambda v: isinstance(v, bool), "true or false"),
    "required": _kind_check(lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v), "a list of property names"),
}
