"""redflow's JSON Schema checker (redflow/core/json_schema.py), without Redis.

Invariants:
- strict: a value passes exactly when the reference validator (jsonschema,
  draft 2020-12, formats as annotations) says it is valid, for every schema
  the define-time check lets through;
- lax: a value a pydantic model accepts is never refused by the lax check of
  that model's JSON Schema (the client must not refuse what the worker takes);
- a schema redflow would not check completely is refused when the workflow is
  defined, naming the keyword and where it is.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Callable
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from helpers import LONG_TESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from redflow import InputValidationError, RedflowError, Registry, define_workflow
from redflow.core.input_schema import CHECK_LAX, CHECK_STRICT, as_schema, describes_every_input, schema_from_metadata, synced_schema
from redflow.core.json_schema import ANNOTATIONS, ASSERTIONS, JsonSchema
from redflow.core.json_schema_lint import CHECKS, lint_json_schema
from redflow.registry import validate_input

# -- strict: the same answers as the reference validator ----------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 2.0, -1.5, 3.0]), st.sampled_from(["", "a", "ab", "b1", "abc"])
)
values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)), max_leaves=8
)
leaf_schemas = st.one_of(
    st.booleans(),
    st.builds(lambda t: {"type": t}, st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(["integer", "string", "null"]), min_size=1, max_size=2, unique=True)),
    st.builds(lambda m: {"enum": m}, st.lists(scalars, min_size=1, max_size=3)),
    st.builds(lambda c: {"const": c}, values),
    st.builds(lambda k, n: {k: n}, st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]), st.integers(-2, 2)),
    st.builds(lambda n: {"multipleOf": n}, st.integers(1, 3)),
    st.builds(
        lambda k, n: {k: n},
        st.sampled_from(["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"]),
        st.integers(0, 2),
    ),
    st.builds(lambda p: {"pattern": p}, st.sampled_from(["^a", "b$", "[0-9]", "^$"])),
    st.just({"uniqueItems": True}),
    st.builds(lambda r: {"required": r}, st.lists(st.sampled_from("abc"), max_size=2, unique=True)),
)


def _composite(inner: Any) -> Any:
    return st.one_of(
        st.builds(
            lambda p, extra: {"properties": p, "additionalProperties": extra},
            st.dictionaries(st.sampled_from("ab"), inner, max_size=2),
            inner,
        ),
        st.builds(lambda p: {"patternProperties": {"^a": p}}, inner),
        st.builds(lambda p: {"propertyNames": p}, inner),
        st.builds(lambda i: {"items": i}, inner),
        st.builds(lambda ps, i: {"prefixItems": ps, "items": i}, st.lists(inner, min_size=1, max_size=2), inner),
        st.builds(lambda k, subs: {k: subs}, st.sampled_from(["allOf", "anyOf", "oneOf"]), st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda s: {"not": s}, inner),
        st.builds(lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a, inner, inner),
    )


schemas = st.recursive(leaf_schemas, _composite, max_leaves=6)
#: Documents: a schema, or one whose definition is reached through $ref (and from itself: recursion).
documents = st.one_of(
    schemas,
    st.builds(
        lambda d, s: {"$defs": {"D": d, "R": {"anyOf": [s, {"items": {"$ref": "#/$defs/R"}}]}},
                      "properties": {"a": {"$ref": "#/$defs/D"}}, "items": {"$ref": "#/$defs/R"}},
        schemas, schemas,
    ),
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=3000 if LONG_TESTS else 400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, values)
def test_strict_answers_what_the_reference_validator_answers(schema, value):
    lint_json_schema(schema)  # every generated schema is one redflow checks completely
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (JsonSchema(schema).issues(value) == []) is expected


def test_a_refusal_names_where_and_why_and_lists_the_issues():
    schema = as_schema(
        {
            "type": "object",
            "properties": {"qty": {"type": "integer", "minimum": 1}, "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}}},
            "required": ["qty"],
            "additionalProperties": False,
            "$defs": {"Line": {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]+$"}}, "required": ["sku"]}},
        }
    )
    with pytest.raises(InputValidationError) as refused:
        schema({"qty": "two", "lines": [{"sku": "ab"}, {}], "x": 1})
    assert str(refused.value) == (
        'Workflow input validation failed: input["qty"]: "two" is not of type integer; '
        'input["lines"][0]["sku"]: "ab" does not match \'^[A-Z]+$\'; input["lines"][1]["sku"]: is required (and 1 more)'
    )
    assert [(issue["loc"], issue["type"]) for issue in refused.value.issues] == [
        (["qty"], "type"), (["lines", 0, "sku"], "pattern"), (["lines", 1, "sku"], "required"), (["x"], "additionalProperties"),
    ]  # fmt: skip
    optional = JsonSchema({"anyOf": [{"$ref": "#/$defs/M"}, {"type": "null"}], "$defs": {"M": {"type": "object", "required": ["a"]}}})
    assert optional.issues({}) == [{"loc": ["a"], "msg": "is required", "type": "required"}]  # the branch whose type fits
    assert optional.issues(3)[0]["msg"] == "3 is not of type object or null"


def test_a_json_schema_checks_and_returns_the_json_form_of_the_input():
    schema = as_schema({"type": "object", "properties": {"pair": {"type": "array", "maxItems": 2}}})
    assert schema({"pair": (1, 2)}) == {"pair": [1, 2]}  # a tuple is an array, as the worker decodes it
    assert validate_input({"type": "integer"}, 3) == 3  # validate_input takes the dict itself too
    with pytest.raises(InputValidationError, match=r'input\["pair"\] is a date: JSON has no dates'):
        validate_input(schema, {"pair": datetime.date(2026, 1, 1)})


def test_a_ref_loop_and_data_nested_past_the_stack_are_refused_not_crashed():
    assert JsonSchema({"$ref": "#"}).issues(1)[0]["type"] == "$ref"
    assert JsonSchema({"anyOf": [{"$ref": "#"}, {"$ref": "#"}, {"$ref": "#"}]}).issues(1) != []  # cut at once, no 3**n walk
    assert JsonSchema({"anyOf": [{"$ref": "#"}, {"type": "integer"}]}, lax=True).issues(1) == []
    deep: Any = 1
    for _ in range(250):
        deep = [deep]
    nested = JsonSchema(
        {"$defs": {"N": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/N"}}]}}, "$ref": "#/$defs/N"}
    )
    assert nested.issues([[[1]]]) == [] and nested.issues([[["x"]]]) != []
    assert nested.issues(deep) != []  # too deep to follow: refused in strict, never accepted unchecked
    assert JsonSchema(nested.document, lax=True).issues(deep) == []  # lax: the worker decides


# -- define time: a schema redflow would not check completely is refused ---------------------


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "objet"}, "at #/type: a type is one of"),
        ({"properties": {"when": {"if": {"type": "string"}}}}, "at #/properties/when: keyword 'if' is not one redflow checks"),
        ({"contains": {"type": "integer"}}, "keyword 'contains' is not one redflow checks"),
        ({"$ref": "https://example.com/order.json"}, "only references inside the schema are followed"),
        ({"$ref": "#/$defs/Missing"}, "'#/$defs/Missing' names no schema"),
        ({"minimum": "1"}, "at #/minimum: a number"),
        ({"maxLength": -1}, "at #/maxLength: an integer >= 0"),
        ({"maxItems": True}, "at #/maxItems: an integer >= 0"),
        ({"multipleOf": 0}, "at #/multipleOf: a number > 0"),
        ({"pattern": "("}, "at #/pattern: a regular expression Python can compile"),
        ({"patternProperties": {"(": {}}}, "at #/patternProperties: '(' is not a regular expression"),
        ({"items": 3}, "at #/items: a schema is an object or true/false"),
        ({"anyOf": []}, "at #/anyOf: a non-empty list of schemas"),
        ({"required": "name"}, "at #/required: a list of property names"),
        ({"uniqueItems": "yes"}, "at #/uniqueItems: true or false"),
        ({"enum": "a"}, "at #/enum: a list of values"),
        ({"properties": {"a/b": {"type": "nope"}}}, "at #/properties/a~1b/type"),
        ({"default": datetime.date(2026, 1, 1)}, "the JSON Schema is not JSON"),
    ],
)
def test_a_schema_redflow_would_not_check_completely_is_refused_when_defined(schema, message):
    with pytest.raises(RedflowError, match="workflow 'order': ") as refused:
        define_workflow("order", schema=schema, registry=Registry())(lambda ctx: None)
    assert message in str(refused.value)


def test_every_checked_keyword_is_linted_and_annotations_are_not_refused():
    assert set(CHECKS) == ASSERTIONS | {"$defs", "definitions", "contentSchema"}
    document = {keyword: "x" for keyword in ANNOTATIONS - {"$defs", "definitions", "contentSchema"}}
    lint_json_schema(document)
    assert JsonSchema({"type": "string", "format": "email"}).issues("not an email") == []  # format: an annotation


def test_a_schema_that_is_neither_callable_nor_a_model_nor_a_dict_is_refused_when_defined():
    with pytest.raises(RedflowError, match="workflow 'order': schema must be a callable, a pydantic model or a JSON Schema dict, not 42"):
        define_workflow("order", schema=42, registry=Registry())(lambda ctx: None)


# -- lax: never refuses what the pydantic model accepts ---------------------------------------


class Color(enum.IntEnum):
    RED = 1
    BLUE = 2


class Line(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d+$", max_length=12)
    qty: int = Field(ge=1, le=99)


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: int
    lines: list[Line] = Field(min_length=1, max_length=3)
    note: str | None = None
    rush: bool = False
    price: float = Field(default=0.0, gt=-1)
    color: Color = Color.RED
    kind: Literal["retail", "wholesale", 7] = "retail"
    channel: Literal["web", "phone"] = "web"
    tags: set[int] = Field(default_factory=set, max_length=2)
    due: datetime.datetime | None = None
    pair: tuple[int, str] | None = None
    extra: dict[str, int] = Field(default_factory=dict)


#: Values for each field of Order: valid ones, ones pydantic converts ("2", 2.0, True, "yes", a unix
#: time), and ones it refuses, so that many generated orders are accepted only through a conversion.
ints_ish = st.one_of(st.integers(-1, 120), st.sampled_from(["1", " 2 ", "3.0", "1_0", 2.0, True, False, 1.5, "x", None, [1]]))
line_values = st.fixed_dictionaries(
    {"sku": st.sampled_from(["ABC-1", "ABC-12", "abc", " ABC-1", "ABC-1234567890", 5]), "qty": ints_ish},
    optional={"x": scalars},
)
order_values = st.fixed_dictionaries(
    {"order_id": ints_ish, "lines": st.lists(line_values, max_size=4)},
    optional={
        "note": st.one_of(st.none(), st.text(max_size=3), st.integers(), st.just([])),
        "rush": st.sampled_from([True, False, "yes", "off", 1, 0, "true", 2, "maybe", None]),
        "price": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["1.5", "1e3", True, "-2", "nan", "x"])),
        "color": st.sampled_from([1, 2, "1", "2", 1.0, 3, "RED", True]),
        "kind": st.sampled_from(["retail", "wholesale", 7, "7", 7.0, "x", True]),
        "channel": st.sampled_from(["web", "phone", "mail", 1, None]),
        "tags": st.lists(ints_ish, max_size=4),
        "due": st.sampled_from([None, 1767225600, 1767225600.5, "1767225600", "2026-01-02T03:04:05Z", "2026-01-02", "soon", True]),
        "pair": st.one_of(st.none(), st.lists(st.sampled_from([1, "1", "a", 2.0, True]), max_size=3)),
        "extra": st.dictionaries(st.sampled_from(["a", "1"]), ints_ish, max_size=2),
        "unknown": scalars,
    },
)


ORDER_LAX = JsonSchema(Order.model_json_schema(), lax=True)


@pytest.mark.slow
@settings(max_examples=5000 if LONG_TESTS else 800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order_values)
def test_lax_never_refuses_an_input_the_model_accepts(value):
    try:
        Order.model_validate(value)
    except ValueError:
        return  # refused by the model: the lax check may refuse it or leave it to the worker
    assert ORDER_LAX.issues(value) == [], value


def test_lax_still_refuses_what_no_conversion_saves():
    checker = JsonSchema(Order.model_json_schema(), lax=True)
    good = {"order_id": "7", "lines": [{"sku": "ABC-1", "qty": "2"}], "rush": "yes", "color": "2", "tags": [1, 1, 2], "due": 1767225600}
    Order.model_validate(good)
    assert checker.issues(good) == []
    strict = JsonSchema(checker.document).issues(good)  # why lax: the strict reading refuses what pydantic converts
    assert sorted({tuple(issue["loc"]) for issue in strict}) == [
        ("color",),
        ("due",),
        ("lines", 0, "qty"),
        ("order_id",),
        ("rush",),
        ("tags",),
    ]
    # "kind": a string is left to the worker where a member is a number (pydantic converts for an IntEnum)
    refused = checker.issues({"lines": [{"sku": "abc", "qty": 0}], "colour": 1, "kind": "retial", "channel": "mail", "note": []})
    assert [(issue["loc"], issue["type"]) for issue in refused] == [
        (["order_id"], "required"), (["lines", 0, "sku"], "pattern"), (["lines", 0, "qty"], "minimum"),
        (["colour"], "additionalProperties"), (["channel"], "enum"), (["note"], "anyOf"),
    ]  # fmt: skip


class Plain(BaseModel):
    n: int

    @field_validator("n")  # after: it only refuses more
    @classmethod
    def positive(cls, value: int) -> int:
        return value


class FieldBefore(BaseModel):
    n: int

    @field_validator("n", mode="before")
    @classmethod
    def parse(cls, value: Any) -> Any:
        return value


class ModelBefore(BaseModel):
    n: int

    @model_validator(mode="before")
    @classmethod
    def wrap(cls, value: Any) -> Any:
        return {"n": value} if not isinstance(value, dict) else value


class AnnotatedBefore(BaseModel):
    n: Annotated[int, BeforeValidator(lambda v: v)]


class Nested(BaseModel):
    inner: FieldBefore


class Aliases(BaseModel):
    n: int = Field(validation_alias=AliasChoices("n", "number"))


class ByName(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    n: int = Field(alias="N")


class Stripped(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    s: str = Field(max_length=2)


class NumbersAsText(BaseModel):
    model_config = ConfigDict(coerce_numbers_to_str=True)
    s: str


@pytest.mark.parametrize(
    ("model", "checked"),
    [
        (Plain, True),
        (Order, True),
        (FieldBefore, False),
        (ModelBefore, False),
        (AnnotatedBefore, False),
        (Nested, False),
        (Aliases, False),
        (ByName, False),
        (Stripped, False),
        (NumbersAsText, False),
    ],  # fmt: skip
)
def test_a_model_that_rewrites_its_input_before_checking_it_syncs_its_schema_unchecked(model, checked):
    synced = synced_schema(model)
    assert synced is not None and synced.check == (CHECK_LAX if checked else None)
    assert describes_every_input(model) is checked
    checker = schema_from_metadata(synced.json, synced.check)
    assert (checker is not None) is checked


def test_what_is_synced_of_each_kind_of_schema():
    strict = synced_schema(as_schema({"type": "integer"}))
    assert strict is not None and (strict.json, strict.check) == ('{"type":"integer"}', CHECK_STRICT)
    assert synced_schema(lambda value: value) is None and synced_schema(None) is None

    class NoJsonSchema(BaseModel):
        fn: Callable[[int], int] | None = None  # pydantic: PydanticInvalidForJsonSchema

    assert synced_schema(NoJsonSchema) is None  # pydantic cannot describe it: nothing synced, the worker checks
    assert schema_from_metadata('{"type":"integer"}', None) is None  # another package's sync: not checked
    assert schema_from_metadata('{"type":"integer"}', "someday") is None  # a check this version does not know
    assert schema_from_metadata("{not json", CHECK_STRICT) is None
    lax = schema_from_metadata('{"type":"integer","if":{}}', CHECK_LAX)
    assert lax is not None and lax.lax and lax.issues("7") == [] and lax.issues([7]) != []
