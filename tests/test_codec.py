"""Values and JSON (the table of docs/guide/values.md): what is converted, what is refused,
and one message naming the path of the refused value."""

import collections
import dataclasses
import datetime
import decimal
import enum
import uuid

import pytest

from redflow import InputValidationError, OutputSerializationError, Registry, define_workflow
from redflow.core import codec
from redflow.core.errors import SerializationError
from redflow.testing import run_inline


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


Pair = collections.namedtuple("Pair", "a b")


@pytest.mark.parametrize(
    ("value", "comes_back"),
    [
        ({"a": [1, 2.5, "x", True, None]}, {"a": [1, 2.5, "x", True, None]}),
        ((1, 2), [1, 2]),
        ({7: "a", None: "b", 2.5: "c", False: "d"}, {"7": "a", "null": "b", "2.5": "c", "false": "d"}),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Color.RED, "red"),
        (float("nan"), None),
        (float("inf"), None),
        (2**63 - 1, 2**63 - 1),
    ],
    ids=["json", "tuple", "non-str-keys", "uuid", "enum", "nan", "inf", "int64"],
)
def test_what_json_holds_or_orjson_converts_comes_back_in_its_json_form(value, comes_back):
    assert codec.loads(codec.dumps(value)) == comes_back


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"when": datetime.datetime(2026, 1, 2, 3, 4)}, 'input["when"] is a datetime: JSON has no dates or times, pass value.isoformat()'),
        ({"day": [datetime.date(2026, 1, 2)]}, 'input["day"][0] is a date: JSON has no dates or times'),
        ({"at": datetime.time(9)}, 'input["at"] is a time: JSON has no dates or times'),
        ({"p": Point(1)}, 'input["p"] is a dataclass (Point): pass dataclasses.asdict(value), the handler gets a dict'),
        ({"items": [1, 2, 3, {4}]}, 'input["items"][3] is a set: JSON has no sets, pass a list'),
        ({"tags": frozenset()}, 'input["tags"] is a frozenset: JSON has no sets'),
        ({"blob": b"\x00"}, 'input["blob"] is bytes: JSON has no bytes, pass text (decoded, or base64)'),
        ({"price": decimal.Decimal("9.99")}, 'input["price"] is a Decimal: pass str(value) to keep it exact, or a float'),
        ([2**64], "input[0] is an int beyond 64 bits: pass it as a str"),
        ({"s": "\ud800"}, 'input["s"] is a str that is not valid UTF-8'),
        ({(1, 2): 3}, "input has a key of type tuple ((1, 2)): JSON keys are strings"),
        ({"pair": Pair(1, 2)}, 'input["pair"] is a Pair (a named tuple): pass value._asdict() or a list'),
        ({"o": object()}, 'input["o"] is an object, which JSON cannot hold: pass dicts, lists, str, int, float, bool or None'),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else "",
)
def test_what_json_cannot_hold_is_refused_with_its_path_and_what_to_pass(value, message):
    with pytest.raises(SerializationError) as refused:
        codec.dumps(value, what="input")
    assert str(refused.value).startswith(message)
    assert refused.value.__cause__ is None and "serializable" not in str(refused.value)  # one message, no stutter


def test_a_value_nested_too_deep_or_containing_itself_is_refused_with_a_short_path():
    loop = {}
    loop["self"] = loop
    with pytest.raises(SerializationError) as refused:
        codec.dumps(loop, what="input")
    text = str(refused.value)
    assert text.startswith('input["self"]["self"]["self"]["self"]...(') and "(or contains itself)" in text and len(text) < 200
    deep = 1
    for _ in range(codec.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(SerializationError, match=r"is nested too deep: JSON encoding allows 254 levels of containers"):
        codec.dumps({"deep": deep}, what="input")


def test_the_path_is_only_looked_for_once_encoding_failed(monkeypatch):
    def walked(*args):
        raise AssertionError("the hot path walked the value")

    monkeypatch.setattr(codec, "_offender", walked)
    assert codec.dumps({"a": [1, {"b": uuid.UUID(int=0)}]}) == '{"a":[1,{"b":"00000000-0000-0000-0000-000000000000"}]}'


def test_a_run_with_a_datetime_in_its_input_is_refused_naming_it_and_nothing_is_written(client, registry, r):
    @define_workflow("plan", registry=registry)
    def plan(ctx):
        return ctx.input

    with pytest.raises(InputValidationError) as refused:
        client.run("plan", {"items": [{"when": datetime.datetime(2026, 1, 2)}]})
    assert str(refused.value) == (
        'input of workflow \'plan\' is not JSON-serializable: input["items"][0]["when"] is a datetime: '
        "JSON has no dates or times, pass value.isoformat() (or a unix time) and parse it in the handler"
    )
    assert r.zcard(client.keys.runs_created()) == 0


def test_a_step_or_workflow_output_json_cannot_hold_names_its_path():
    registry = Registry()

    @define_workflow("step-set", registry=registry, max_attempts=1)
    def step_set(ctx):
        return ctx.step.run("load", lambda: {"ids": {1, 2}})

    @define_workflow("output-point", registry=registry, max_attempts=1)
    def output_point(ctx):
        return [Point(1)]

    with pytest.raises(OutputSerializationError, match=r"^Step output is not JSON-serializable: load: output\[\"ids\"\] is a set: "):
        run_inline(step_set)
    with pytest.raises(OutputSerializationError, match=r"^Workflow output is not JSON-serializable: output\[0\] is a dataclass \(Point\)"):
        run_inline(output_point)
