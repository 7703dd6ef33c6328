"""JSON Schema: the subset redflow checks input against, with and without a workflow's code. No I/O.

Two uses, one checker:

- ``schema={...}`` on a workflow (strict): the client and the worker check
  the input's JSON form against exactly the keywords of :data:`ASSERTIONS`
  (JSON Schema 2020-12 semantics; ``format`` is an annotation, as in the
  spec's default); a schema that uses any other keyword is refused when the
  workflow is defined (``core/json_schema_lint.py``), so nothing in it goes
  unchecked.
- a pydantic model's JSON Schema synced by a worker, checked by a client
  that has no code (``lax``): pydantic converts between scalars (``"42"``
  to 42, ``1`` to True, a unix time to a datetime), so a scalar given where
  another kind of scalar is expected, and the keywords that its conversions
  can satisfy (``uniqueItems`` and ``maxItems`` of a set, ``not``), are left
  to the worker; a keyword this checker does not know is ignored. The rule:
  the lax check never refuses input that the model accepts.

A refusal is an :class:`InputValidationError` whose ``issues`` are
``{"loc", "msg", "type"}`` dicts (as pydantic's ``errors()``: where, what,
the keyword), the first few in its message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard
from urllib.parse import unquote

from redflow.core import codec
from redflow.core.errors import InputValidationError, SerializationError

#: The keywords checked (every other one is an annotation, or refused at define time).
ASSERTIONS = frozenset(
    {
        "$ref", "type", "enum", "const", "allOf", "anyOf", "oneOf", "not",
        "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "maxLength", "minLength", "pattern",
        "items", "prefixItems", "maxItems", "minItems", "uniqueItems",
        "properties", "patternProperties", "additionalProperties", "propertyNames",
        "required", "maxProperties", "minProperties",
    }
)  # fmt: skip
#: Keywords that describe and check nothing (``format`` included: JSON Schema's default).
ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$comment", "$defs", "definitions", "title", "description", "default", "examples",
        "deprecated", "readOnly", "writeOnly", "format", "contentEncoding", "contentMediaType", "contentSchema",
        "discriminator",
    }
)  # fmt: skip
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
#: How many issues a refusal lists (its message names the first few).
MAX_ISSUES = 20
_SHOWN = 3
#: Scalar kinds pydantic converts between in lax mode ("numeric" is integer and number).
_LAX_GROUP = {"boolean": "boolean", "integer": "numeric", "number": "numeric", "string": "string"}

#: Where in the input (keys and indexes), and what is wrong there.
Loc = tuple[Any, ...]
Issues = list[dict[str, Any]]
#: The schemas applied to one value so far, through ``$ref`` and ``allOf`` / ``anyOf`` / ``oneOf`` /
#: ``not`` (their ids): one applied twice is a loop that reads no deeper into the value.
Chain = tuple[int, ...]


class JsonSchema:
    """A JSON Schema document to check values against; called, it is a ``schema=``
    (``(input) -> input``): the input's JSON form, or :class:`InputValidationError`."""

    __slots__ = ("document", "lax", "_refs", "_patterns")

    def __init__(self, document: Mapping[str, Any] | bool, *, lax: bool = False) -> None:
        # Its JSON form: plain dicts and lists (what a client reads back from the sync), and a copy
        # the caller's later changes do not reach.
        self.document: Any = codec.loads(codec.dumps(document, what="schema"))
        self.lax = lax
        self._refs: dict[str, Any] = {}
        self._patterns: dict[str, re.Pattern[str] | None] = {}

    def __repr__(self) -> str:
        return f"JsonSchema({self.document!r}{', lax=True' if self.lax else ''})"

    def __call__(self, value: Any) -> Any:
        data = json_form(value)
        self.check(data)
        return data

    def check(self, data: Any, *, source: str = "") -> None:
        """Refuse ``data`` (JSON values) with :class:`InputValidationError` when it
        does not match; ``source``: which schema, for the message."""
        found = self.issues(data)
        if found:
            shown = "; ".join(f"{_where('input', issue['loc'])}: {issue['msg']}" for issue in found[:_SHOWN])
            more = f" (and {len(found) - _SHOWN} more)" if len(found) > _SHOWN else ""
            raise InputValidationError(f"Workflow input validation failed{f' ({source})' if source else ''}: {shown}{more}", issues=found)

    def issues(self, data: Any) -> Issues:
        """What is wrong with ``data`` (JSON values), at most :data:`MAX_ISSUES`; empty when it matches."""
        found: Issues = []
        try:
            self._check(self.document, data, (), found, ())
        except RecursionError:  # data nested deeper than Python's stack allows to follow
            if not self.lax:  # strict: refused rather than let through unchecked; lax: the worker decides
                return [_issue((), "is nested too deep to check", "depth")]
        return found[:MAX_ISSUES]

    # -- the keywords -----------------------------------------------------------
    def _check(self, schema: Any, value: Any, loc: Loc, out: Issues, chain: Chain) -> None:
        if schema is False:
            out.append(_issue(loc, "is not allowed here", "false"))
            return
        if not isinstance(schema, dict) or len(out) >= MAX_ISSUES:
            return  # true, or a form this checker does not know (lint refuses it in strict): the worker judges
        if id(schema) in chain:
            if not self.lax:
                out.append(_issue(loc, "meets a $ref loop that reads no deeper into the input", "$ref"))
            return
        chain = (*chain, id(schema))
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            if target is not _MISSING:
                self._check(target, value, loc, out, chain)
        kind = _kind(value)
        if "type" in schema and not self._type_ok(kind, schema["type"]):
            out.append(_issue(loc, f"{_short(value)} is not of type {_types(schema['type'])}", "type"))
        for word, members in (("enum", schema.get("enum")), ("const", [schema["const"]] if "const" in schema else None)):
            if isinstance(members, list) and not self._member(value, members):
                expected = f"one of {', '.join(_short(m) for m in members[:8])}" if word == "enum" else _short(members[0])
                out.append(_issue(loc, f"{_short(value)} is not {expected}", word))
        self._combinators(schema, value, loc, out, chain)
        check = _BY_KIND.get(kind)
        if check is not None:
            check(self, schema, value, loc, out, chain)

    def _combinators(self, schema: dict[str, Any], value: Any, loc: Loc, out: Issues, chain: Chain) -> None:
        if _COMBINATORS.isdisjoint(schema):
            return
        for sub in _schemas(schema.get("allOf")):
            self._check(sub, value, loc, out, chain)
        for word in ("anyOf", "oneOf"):
            branches = _schemas(schema.get(word))
            if not branches:
                continue
            results = [self._sub(branch, value, loc, chain) for branch in branches]
            passed = sum(1 for found in results if not found)
            if passed == 0:
                out.extend(self._closest(value, loc, branches, results, word))
            elif word == "oneOf" and passed > 1 and not self.lax:  # lax: conversions can make several match
                out.append(_issue(loc, f"matches {passed} of the oneOf schemas, not exactly one", word))
        if "not" in schema and not self.lax and not self._sub(schema["not"], value, loc, chain):
            out.append(_issue(loc, f"{_short(value)} must not match the 'not' schema", "not"))

    def _sub(self, schema: Any, value: Any, loc: Loc, chain: Chain) -> Issues:
        found: Issues = []
        self._check(schema, value, loc, found, chain)
        return found

    def _type_ok(self, kind: str, expected: Any) -> bool:
        names = [expected] if isinstance(expected, str) else expected if isinstance(expected, list) else None
        if names is None:
            return True
        if kind in names or (kind == "integer" and "number" in names):
            return True
        group = _LAX_GROUP.get(kind)
        return self.lax and group is not None and any(_LAX_GROUP.get(name) not in (None, group) for name in names)

    def _member(self, value: Any, members: list[Any]) -> bool:
        if any(_equal(value, member) for member in members):
            return True
        group = _LAX_GROUP.get(_kind(value))
        return self.lax and group is not None and any(_LAX_GROUP.get(_kind(m)) not in (None, group) for m in members)

    def _number(self, schema: dict[str, Any], value: Any, loc: Loc, out: Issues, chain: Chain) -> None:
        for word, fails, relation in _NUMBER_BOUNDS:
            bound = schema.get(word)
            if _is_number(bound) and fails(value, bound):
                out.append(_issue(loc, f"{_short(value)} is not {relation} {_short(bound)}", word))
        step = schema.get("multipleOf")
        if _is_number(step) and step > 0 and not _multiple(value, step):
            out.append(_issue(loc, f"{_short(value)} is not a multiple of {_short(step)}", "multipleOf"))

    def _string(self, schema: dict[str, Any], value: str, loc: Loc, out: Issues, chain: Chain) -> None:
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            out.append(_issue(loc, f"{_short(value)} is shorter than {low} characters", "minLength"))
        if isinstance(high, int) and len(value) > high:
            out.append(_issue(loc, f"{_short(value)} is longer than {high} characters", "maxLength"))
        pattern = self._pattern(schema.get("pattern"))
        if pattern is not None and pattern.search(value) is None:
            out.append(_issue(loc, f"{_short(value)} does not match {pattern.pattern!r}", "pattern"))

    def _array(self, schema: dict[str, Any], value: list[Any], loc: Loc, out: Issues, chain: Chain) -> None:
        unique = schema.get("uniqueItems") is True
        low, high = schema.get("minItems"), schema.get("maxItems")
        if isinstance(low, int) and len(value) < low:
            out.append(_issue(loc, f"has {len(value)} items, fewer than {low}", "minItems"))
        if isinstance(high, int) and len(value) > high and not (self.lax and unique):  # a set drops duplicates first
            out.append(_issue(loc, f"has {len(value)} items, more than {high}", "maxItems"))
        if unique and not self.lax and _has_duplicates(value):
            out.append(_issue(loc, "has duplicate items", "uniqueItems"))
        prefix = _schemas(schema.get("prefixItems"))
        items = schema.get("items")
        if isinstance(items, list):  # the tuple form of drafts before 2020-12 (synced by others)
            prefix, items = _schemas(items), None
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else items
            if sub is not None:
                self._check(sub, item, (*loc, index), out, ())

    def _object(self, schema: dict[str, Any], value: dict[str, Any], loc: Loc, out: Issues, chain: Chain) -> None:
        required = schema.get("required")
        for name in required if isinstance(required, list) else ():
            if isinstance(name, str) and name not in value:
                out.append(_issue((*loc, name), "is required", "required"))
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if isinstance(low, int) and len(value) < low:
            out.append(_issue(loc, f"has {len(value)} properties, fewer than {low}", "minProperties"))
        if isinstance(high, int) and len(value) > high:
            out.append(_issue(loc, f"has {len(value)} properties, more than {high}", "maxProperties"))
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        patterns = schema.get("patternProperties")
        patterns = [(self._pattern(p), sub) for p, sub in patterns.items()] if isinstance(patterns, dict) else []
        extra = schema.get("additionalProperties", True)
        names = schema.get("propertyNames", True)
        for key, item in value.items():
            if names is not True:
                self._check(names, key, (*loc, key), out, ())
            matched = key in properties
            if matched:
                self._check(properties[key], item, (*loc, key), out, ())
            for pattern, sub in patterns:
                if pattern is not None and pattern.search(key) is not None:
                    matched = True
                    self._check(sub, item, (*loc, key), out, ())
            if not matched and extra is False:
                out.append(_issue((*loc, key), "is not an allowed property", "additionalProperties"))
            elif not matched:
                self._check(extra, item, (*loc, key), out, ())

    def _closest(self, value: Any, loc: Loc, branches: list[Any], results: list[Issues], word: str) -> Issues:
        """Why no branch of an ``anyOf`` / ``oneOf`` matched: the issues of the one
        whose ``type`` fits (``Optional[Model]``: the model's), else the types expected."""
        types = [self._type_of(branch) for branch in branches]
        kind = _kind(value)
        fitting = [found for expected, found in zip(types, results) if expected is not None and _names_kind(expected, kind)]
        if len(fitting) == 1:
            return fitting[0]
        if all(expected is not None for expected in types):
            return [_issue(loc, f"{_short(value)} is not of type {' or '.join(_types(t) for t in types)}", word)]
        return [_issue(loc, f"{_short(value)} matches none of the {len(branches)} {word} schemas", word)]

    def _type_of(self, schema: Any) -> Any:
        """The ``type`` a schema (or the one its ``$ref`` names) declares, or None."""
        for _ in range(8):
            if not isinstance(schema, dict):
                return None
            if "type" in schema:
                return schema["type"]
            ref = schema.get("$ref")
            schema = self._resolve(ref) if isinstance(ref, str) else None
        return None

    # -- references and patterns -----------------------------------------------
    def _resolve(self, ref: str) -> Any:
        """The schema a local ``$ref`` (``#``, ``#/$defs/Name``) points at, or ``_MISSING``."""
        if ref not in self._refs:
            self._refs[ref] = resolve_pointer(self.document, ref)
        return self._refs[ref]

    def _pattern(self, source: Any) -> re.Pattern[str] | None:
        if not isinstance(source, str):
            return None
        if source not in self._patterns:
            # lax: a pattern Python's re reads otherwise than pydantic's engine ([[:alpha:]]) is the worker's
            self._patterns[source] = None if self.lax and "[:" in source else compile_pattern(source)
        return self._patterns[source]


_MISSING: Any = object()
_COMBINATORS = frozenset({"allOf", "anyOf", "oneOf", "not"})


def json_form(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists, enums as their values):
    what the worker decodes, so what a schema checks. :class:`SerializationError` if not JSON."""
    return codec.loads(codec.dumps(value, what="input"))


def resolve_pointer(document: Any, ref: str) -> Any:
    """The part of ``document`` a local reference names (``#``, ``#/$defs/Order``), or ``_MISSING``."""
    if ref == "#":
        return document
    if not ref.startswith("#/"):
        return _MISSING  # remote and anchor references are not followed
    node = document
    for token in ref[2:].split("/"):
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def is_missing(node: Any) -> bool:
    return node is _MISSING


def compile_pattern(source: str) -> re.Pattern[str] | None:
    """A ``pattern`` as Python's ``re`` reads it (searched, not anchored), or None when it does not compile."""
    try:
        return re.compile(source)
    except re.error:
        return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "other"


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 equals 1.0, true is not 1."""
    kind_a, kind_b = _kind(a), _kind(b)
    if {kind_a, kind_b} <= {"integer", "number"}:
        return bool(a == b)
    if kind_a != kind_b:
        return False
    if kind_a == "array":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if kind_a == "object":
        return a.keys() == b.keys() and all(_equal(a[key], b[key]) for key in a)
    return bool(a == b)


def _has_duplicates(items: list[Any]) -> bool:
    return len({_canonical(item) for item in items}) != len(items)


def _canonical(value: Any) -> Any:
    """A hashable form equal for JSON-equal values (1 and 1.0; not true and 1): uniqueItems in linear time."""
    kind = _kind(value)
    if kind == "array":
        return (kind, tuple(_canonical(item) for item in value))
    if kind == "object":
        return (kind, frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("number" if kind == "integer" else kind, value)


def _multiple(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    quotient = value / step
    return math.isfinite(quotient) and abs(quotient - round(quotient)) <= 1e-9 * max(1.0, abs(quotient))


_NUMBER_BOUNDS: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
    ("minimum", lambda v, b: v < b, ">="),
    ("maximum", lambda v, b: v > b, "<="),
    ("exclusiveMinimum", lambda v, b: v <= b, ">"),
    ("exclusiveMaximum", lambda v, b: v >= b, "<"),
)

_BY_KIND: dict[str, Callable[..., None]] = {
    "integer": JsonSchema._number,
    "number": JsonSchema._number,
    "string": JsonSchema._string,
    "array": JsonSchema._array,
    "object": JsonSchema._object,
}


def _schemas(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _names_kind(expected: Any, kind: str) -> bool:
    names = [expected] if isinstance(expected, str) else expected if isinstance(expected, list) else []
    return kind in names or (kind == "integer" and "number" in names)


def _types(expected: Any) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


def _issue(loc: Loc, msg: str, keyword: str) -> dict[str, Any]:
    return {"loc": list(loc), "msg": msg, "type": keyword}


def _short(value: Any) -> str:
    try:
        text = codec.dumps(value)
    except SerializationError:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _where(root: str, loc: list[Any]) -> str:
    """``input["items"][0]``: the path style of the JSON encoder's errors."""
    return root + "".join(f"[{part}]" if isinstance(part, int) else f"[{codec.dumps(part)}]" for part in loc)
