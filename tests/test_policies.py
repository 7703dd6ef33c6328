"""Retry policy, codec and input validation: pure functions."""

import pytest

from redflow.core import codec
from redflow.core.errors import (
    CanceledError,
    CorruptDataError,
    InputValidationError,
    NonRetryableError,
    OutputSerializationError,
    RedflowError,
    SerializationError,
    TimeoutError,
    UnknownWorkflowError,
)
from redflow.core.retry import compute_retry_delay_ms, is_retryable
from redflow.registry import Registry, define_workflow, validate_input


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(0, 250, 349), (1, 250, 349), (2, 500, 599), (3, 1000, 1099), (4, 2000, 2099), (8, 30000, 30099), (500, 30000, 30099)],
)
def test_retry_delay_is_exponential_with_jitter_and_a_cap(attempt, low, high):
    delays = {compute_retry_delay_ms(attempt) for _ in range(200)}
    assert min(delays) >= low and max(delays) <= high
    assert len(delays) > 1  # jittered


@pytest.mark.parametrize(
    ("err", "retryable"),
    [
        (ValueError("x"), True),
        (TimeoutError("x"), True),
        (RedflowError("x"), True),
        (NonRetryableError("x"), False),
        (type("Custom", (NonRetryableError,), {})("x"), False),
        (InputValidationError("x"), False),
        (UnknownWorkflowError("x"), False),
        (OutputSerializationError("x"), False),
        (CanceledError(), False),
        (CorruptDataError("x"), False),
    ],
)
def test_which_errors_retry(err, retryable):
    assert is_retryable(err) is retryable


def test_codec_rejects_what_json_cannot_hold():
    with pytest.raises(SerializationError, match=r'^value\["x"\] is an object, which JSON cannot hold'):
        codec.dumps({"x": object()})
    with pytest.raises(SerializationError):
        codec.dumps({1, 2})


def test_codec_names_the_corrupt_value():
    with pytest.raises(CorruptDataError, match="run x inputJson is not valid JSON"):
        codec.loads("{not json", what="run x inputJson")
    assert codec.try_loads("{nope") is None


def test_callable_schema_validates_and_transforms():
    def schema(value):
        if not isinstance(value, dict) or "id" not in value:
            raise ValueError("id is required")
        return {"id": int(value["id"])}

    assert validate_input(schema, {"id": "7"}) == {"id": 7}
    with pytest.raises(InputValidationError, match="id is required"):
        validate_input(schema, {})


def test_model_validate_schema_works_without_pydantic():
    class Model:
        def __init__(self, data):
            self.data = data

        @classmethod
        def model_validate(cls, value):
            if "name" not in value:
                raise ValueError("name missing")
            return cls(value)

        def model_dump(self, mode="python"):
            return dict(self.data, checked=True)

    assert validate_input(Model, {"name": "a"}) == {"name": "a", "checked": True}
    with pytest.raises(InputValidationError, match="name missing"):
        validate_input(Model, {})


def test_define_workflow_registers_with_its_options():
    reg = Registry()

    @define_workflow("greet", queue="emails", max_attempts=5, events=["user.created"], cron=["*/5 * * * *"], registry=reg)
    def greet(ctx):
        return "hi"

    assert reg.get("greet") is greet
    assert (greet.name, greet.queue, greet.max_attempts, greet.events) == ("greet", "emails", 5, ("user.created",))
    assert greet.cron[0].expression == "*/5 * * * *"
    assert reg.queues() == ["emails"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"queue": ""},
        {"cron": ["not a cron"]},
        {"cron": [{"expression": "* * * * *", "timezone": "Mars/Olympus"}]},
        {"cron": [{"expr": "* * * * *"}]},
        {"events": [""]},
    ],
)
def test_define_workflow_rejects_bad_options(kwargs):
    with pytest.raises(RedflowError):
        define_workflow("bad", registry=Registry(), **kwargs)(lambda ctx: None)


def test_a_name_defined_twice_in_one_registry_is_an_error():
    reg = Registry()
    define_workflow("dup", registry=reg)(lambda ctx: 1)
    with pytest.raises(RedflowError, match="already defined"):
        define_workflow("dup", registry=reg)(lambda ctx: 2)
