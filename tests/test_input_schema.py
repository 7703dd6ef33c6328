"""Input checked by name, by a client without the workflow's code (issue 33, items 1 and 4).

Invariants:
- input that the JSON Schema a worker synced refuses, where that schema may be
  checked (a JSON Schema dict: strictly; a pydantic model: leniently), raises
  ``InputValidationError`` and writes nothing;
- input the worker's schema accepts is never refused by name (pydantic's
  conversions, a model that rewrites its input, a callable: left to the worker);
- ``emit_event`` checks the payload against every subscriber's schema before
  it writes anything (no run started, no waiting run resumed, nothing
  scheduled); ``run_many`` checks a list of inputs whole before its first batch;
- a deploy that changes a schema is seen by clients within ``workflow_meta_ttl_s``;
- an unknown name says which Redis (password hidden) and prefix were searched,
  and the nearest names.
"""

from __future__ import annotations

import gevent
import pytest
import redis
from helpers import wait_until
from pydantic import BaseModel, ConfigDict, Field, model_validator

from redflow import InputValidationError, Registry, RunFailedError, UnknownWorkflowError, create_client, define_workflow
from redflow.bench.probe import Probe, server_delta
from redflow.core import codec
from redflow.testing import RedisServer


class Line(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d+$")
    qty: int = Field(ge=1)


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: int
    lines: list[Line] = Field(min_length=1)
    note: str | None = None


class LooseOrder(BaseModel):
    """Takes a bare order id too: its JSON Schema does not say so, so it is synced unchecked."""

    order_id: int

    @model_validator(mode="before")
    @classmethod
    def bare_id(cls, value):
        return {"order_id": value} if not isinstance(value, dict) else value


SHIPMENT = {
    "type": "object",
    "properties": {"order_id": {"type": "integer"}, "carrier": {"enum": ["dhl", "ups"]}},
    "required": ["order_id", "carrier"],
    "additionalProperties": False,
}


def needs_order_id(value):
    if not isinstance(value, dict) or "order_id" not in value:
        raise ValueError("order_id is required")
    return value


def echo(ctx):
    return ctx.input


@pytest.fixture
def deployed(registry):
    """The workflows a worker would sync: a pydantic model, a JSON Schema dict, a callable, a rewriting model."""
    define_workflow("place-order", schema=Order, registry=registry)(echo)
    define_workflow("ship-order", schema=SHIPMENT, registry=registry)(echo)
    define_workflow("audit-order", schema=needs_order_id, registry=registry)(echo)
    define_workflow("loose-order", schema=LooseOrder, registry=registry)(echo)
    return registry


@pytest.fixture
def bare(redis_url, prefix):
    """A client with no workflow code, as `create_client()` in a web app or `redflow-gevent dashboard`."""
    c = create_client(redis_url, prefix=prefix, registry=Registry())
    yield c
    c.close()


def snapshot(r, prefix):
    """Every key under the prefix with its content: equal snapshots, nothing written."""
    read = {
        "string": r.get,
        "hash": r.hgetall,
        "set": lambda k: sorted(r.smembers(k)),
        "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
        "list": lambda k: r.lrange(k, 0, -1),
        "stream": r.xrange,
    }
    return {key: read[r.type(key)](key) for key in r.scan_iter(f"{prefix}:*", count=1000)}


GOOD_ORDER = {"order_id": 7, "lines": [{"sku": "ABC-1", "qty": 2}]}
BAD_ORDERS = [
    ({"order_id": 7, "lines": []}, 'input["lines"]: has 0 items, fewer than 1'),
    ({"lines": [{"sku": "abc", "qty": 0}]}, 'input["order_id"]: is required; input["lines"][0]["sku"]: "abc" does not match'),
    ({**GOOD_ORDER, "coupon": "X"}, 'input["coupon"]: is not an allowed property'),
    ({**GOOD_ORDER, "order_id": [7]}, 'input["order_id"]: [7] is not of type integer'),
    (None, "input: null is not of type object"),
]


@pytest.mark.parametrize(("bad", "why"), BAD_ORDERS)
def test_input_a_synced_pydantic_schema_refuses_is_refused_by_name_and_nothing_is_written(client, deployed, bare, r, prefix, bad, why):
    client.sync_registry(deployed)  # what a worker does when it starts
    bare.run("place-order", GOOD_ORDER)  # the metadata is read (and cached) by a run that passes
    before = snapshot(r, prefix)
    with pytest.raises(InputValidationError) as refused:
        bare.run("place-order", bad)
    message = str(refused.value)
    assert message.startswith(
        "Workflow input validation failed (the JSON Schema synced for 'place-order', checked before the run is created): "
    )
    assert why in message and refused.value.issues
    assert snapshot(r, prefix) == before


def test_input_a_synced_json_schema_refuses_is_refused_by_name_strictly(client, deployed, bare, r, prefix):
    client.sync_registry(deployed)
    before = snapshot(r, prefix)
    for bad, why in [
        ({"order_id": "7", "carrier": "dhl"}, 'input["order_id"]: "7" is not of type integer'),  # strict: no conversion
        ({"order_id": 7, "carrier": "fedex"}, 'input["carrier"]: "fedex" is not one of "dhl", "ups"'),
        ({"order_id": 7}, 'input["carrier"]: is required'),
    ]:
        with pytest.raises(InputValidationError, match="synced for 'ship-order'") as refused:
            bare.run("ship-order", bad)
        assert why in str(refused.value)
    assert snapshot(r, prefix) == before
    with pytest.raises(InputValidationError):
        bare.run_many("ship-order", [{"order_id": 1, "carrier": "ups"}, {"order_id": 2}])
    assert snapshot(r, prefix) == before  # a list is checked whole before the first batch


def test_what_the_model_converts_passes_by_name_and_the_worker_hands_over_the_converted_input(client, deployed, bare, start):
    start(deployed)
    wait_until(lambda: bare.redis.exists(bare.keys.workflow("place-order")), message="the worker synced")
    handle = bare.run("place-order", {"order_id": "7", "lines": [{"sku": "ABC-1", "qty": "2"}]})
    assert handle.result(timeout=10) == {"order_id": 7, "lines": [{"sku": "ABC-1", "qty": 2}], "note": None}
    assert bare.run("loose-order", "42").result(timeout=10) == {"order_id": 42}  # a before-validator's input: not refused by name


def test_a_callable_schema_is_not_checked_by_name_the_worker_refuses_the_input(client, deployed, bare, start, r):
    start(deployed)
    wait_until(lambda: bare.redis.exists(bare.keys.workflow("audit-order")), message="the worker synced")
    meta = r.hgetall(bare.keys.workflow("audit-order"))
    assert "inputSchemaJson" not in meta and "inputSchemaCheck" not in meta  # a callable has no JSON Schema
    handle = bare.run("audit-order", {"id": 7})  # created: nothing to check it against here
    with pytest.raises(RunFailedError, match="InputValidationError: Workflow input validation failed: order_id is required"):
        handle.result(timeout=10)
    assert bare.get_run(handle.id).attempt == 1  # refused input is not retried


def test_what_is_synced_for_each_kind_of_schema(client, deployed, r):
    client.sync_registry(deployed)
    meta = {name: r.hgetall(client.keys.workflow(name)) for name in ("place-order", "ship-order", "loose-order")}
    assert codec.loads(meta["ship-order"]["inputSchemaJson"]) == SHIPMENT and meta["ship-order"]["inputSchemaCheck"] == "strict"
    assert codec.loads(meta["place-order"]["inputSchemaJson"]) == Order.model_json_schema()
    assert meta["place-order"]["inputSchemaCheck"] == "lax"
    assert "inputSchemaJson" in meta["loose-order"] and "inputSchemaCheck" not in meta["loose-order"]


def test_checking_input_by_name_costs_no_redis_command(client, deployed, bare, redis_url):
    client.sync_registry(deployed)

    def commands(name, payload):
        bare.run(name, payload)  # the metadata is read and cached
        probe = Probe(redis_url)
        before = probe.sample()
        for _ in range(10):
            bare.run(name, payload)
        after = probe.sample()
        probe.close()
        return server_delta(before, after).commands

    order = {"order_id": 1, "carrier": "ups"}
    assert commands("ship-order", order) == commands("audit-order", order)  # checked by name, and not


def test_a_schema_synced_by_another_package_or_unreadable_is_not_checked_by_name(bare, r):
    # The asyncio redflow package syncs inputSchemaJson without saying how its worker checks it.
    r.hset(bare.keys.workflow("theirs"), mapping={"name": "theirs", "queue": "default", "inputSchemaJson": '{"type":"integer"}'})
    r.hset(
        bare.keys.workflow("garbled"),
        mapping={"name": "garbled", "queue": "default", "inputSchemaJson": "{oops", "inputSchemaCheck": "strict"},
    )
    assert bare.get_run(bare.run("theirs", "not an int").id).input == "not an int"
    assert bare.get_run(bare.run("garbled", {"any": "thing"}).id).input == {"any": "thing"}


def test_a_deploy_that_changes_a_schema_is_seen_by_name_within_the_metadata_ttl(client, bare):
    first, second, third = Registry(), Registry(), Registry()
    define_workflow("ship-order", schema={"type": "object", "required": ["order_id"]}, registry=first)(echo)
    define_workflow("ship-order", schema=SHIPMENT, registry=second)(echo)
    define_workflow("ship-order", registry=third)(echo)  # the schema removed (below, after a rewriting model)
    client.sync_registry(first)
    bare.run("ship-order", {"order_id": 1})  # read and cached
    client.sync_registry(second)
    bare.run("ship-order", {"order_id": 2})  # within the TTL: the cached schema still lets it through
    bare.workflow_meta_ttl_s = 0.05
    gevent.sleep(0.1)
    with pytest.raises(InputValidationError, match='input\\["carrier"\\]: is required'):
        bare.run("ship-order", {"order_id": 3})
    rewriting = Registry()  # a model that rewrites its input: schema synced, no longer checked by name
    define_workflow("ship-order", schema=LooseOrder, registry=rewriting)(echo)
    client.sync_registry(rewriting)
    gevent.sleep(0.1)
    assert bare.get_run(bare.run("ship-order", "42").id).input == "42"
    client.sync_registry(third)
    gevent.sleep(0.1)
    assert bare.get_run(bare.run("ship-order", "anything").id).input == "anything"


# -- emit_event: all or nothing -----------------------------------------------------------------


@pytest.fixture
def subscribed(registry):
    """Three subscribers of order.placed (one checks nothing, one a model, one a JSON Schema) and a run waiting for it."""
    define_workflow("on-placed-audit", events=["order.placed"], registry=registry)(echo)
    define_workflow("on-placed-order", schema=Order, events=["order.placed"], registry=registry)(echo)
    define_workflow("on-placed-ship", schema=SHIPMENT, events=["order.placed"], registry=registry)(echo)

    @define_workflow("awaits-placed", registry=registry)
    def awaits_placed(ctx):
        return ctx.step.wait_for_event("placed", "order.placed", timeout=60)

    return registry


@pytest.mark.parametrize("emitter", ["with the code", "by name"])
def test_a_payload_one_subscriber_refuses_starts_no_run_and_resumes_no_waiting_run(client, subscribed, bare, start, r, emitter):
    worker = start(subscribed)
    waiting = client.run("awaits-placed", None)
    wait_until(lambda: client.get_run(waiting.id).parked_step == "placed", message="the run waits for order.placed")
    worker.stop(timeout=5)  # nothing runs now: what the emit wrote stays visible
    emitting = client if emitter == "with the code" else bare
    created = r.zcard(client.keys.runs_created("default"))
    waiters = r.hgetall(client.keys.event_waiters("order.placed"))
    payload = {**GOOD_ORDER, "carrier": "dhl"}  # the model forbids "carrier", the JSON Schema requires it
    with pytest.raises(InputValidationError, match="carrier"):
        emitting.emit_event("order.placed", payload)
    with pytest.raises(InputValidationError):
        emitting.schedule_event("order.placed", payload, at=9_999_999_999)
    assert r.zcard(client.keys.runs_created("default")) == created
    assert r.hgetall(client.keys.event_waiters("order.placed")) == waiters
    assert client.get_run(waiting.id).status == "scheduled" and r.zcard(client.keys.scheduled_events()) == 0

    loose = Registry()  # a deploy that agrees: the same payload now starts all three and resumes the waiting run
    define_workflow("on-placed-order", events=["order.placed"], registry=loose)(echo)
    define_workflow("on-placed-ship", events=["order.placed"], registry=loose)(echo)
    client.sync_registry(loose)
    subscribed.unregister("on-placed-order")
    subscribed.unregister("on-placed-ship")
    bare.workflow_meta_ttl_s = 0
    assert len(emitting.emit_event("order.placed", payload)) == 3
    start(subscribed)
    assert waiting.result(timeout=10) == payload


def test_run_many_checks_a_list_whole_and_an_iterator_as_it_goes(client, deployed, r):
    created = client.keys.runs_created("default")
    orders = [GOOD_ORDER, {**GOOD_ORDER, "order_id": 8}, {"order_id": 9}]  # the third has no lines
    with pytest.raises(InputValidationError):
        client.run_many("place-order", orders, batch=1)
    assert r.zcard(created) == 0
    with pytest.raises(InputValidationError):
        client.run_many("place-order", iter(orders), batch=1)
    assert r.zcard(created) == 2  # the batches sent before the refused input stay (documented)


# -- an unknown name says where it looked -------------------------------------------------------


def test_a_typo_gets_the_nearest_names_and_the_redis_and_prefix_searched(client, deployed, bare, redis_server, prefix):
    client.sync_registry(deployed)
    with pytest.raises(UnknownWorkflowError) as typo:
        bare.run("plcae-order", {})
    assert str(typo.value) == (
        f"Unknown workflow: 'plcae-order' (searched this process's registries and the workflows synced to "
        f"redis://127.0.0.1:{redis_server.port}/0 under prefix {prefix!r}); did you mean 'place-order'?"
    )
    assert typo.value.suggestions == ("place-order",) and typo.value.workflow == "plcae-order"
    with pytest.raises(UnknownWorkflowError, match="synced there: 'audit-order', 'loose-order', 'place-order', 'ship-order'$"):
        bare.run("refund", {})
    local = Registry()
    define_workflow("send-invoice", registry=local)(echo)
    with_code = create_client(redis=client.redis, prefix=prefix, registry=local)
    with pytest.raises(UnknownWorkflowError, match="did you mean 'send-invoice'\\?"):
        with_code.run("send-invoce", {})  # the process's own workflows are suggested too


def test_a_client_on_the_wrong_prefix_or_redis_is_told_nothing_is_synced_there(client, deployed, redis_url, prefix):
    client.sync_registry(deployed)
    elsewhere = create_client(redis_url, prefix=f"{prefix}-typo", registry=Registry())
    try:
        with pytest.raises(UnknownWorkflowError) as lost:
            elsewhere.run("place-order", GOOD_ORDER)
    finally:
        elsewhere.close()
    assert f"under prefix '{prefix}-typo'" in str(lost.value) and lost.value.suggestions == ()
    assert str(lost.value).endswith(
        "no workflow is synced there at all: is a worker running against this Redis and prefix? "
        "(check REDIS_URL and REDFLOW_PREFIX, or create_client's url= and prefix=)"
    )


def test_the_redis_named_in_the_error_never_shows_its_password(prefix):
    with RedisServer(extra_args=["--requirepass", "s3cret-pass"]) as server:
        by_url = create_client(f"redis://:s3cret-pass@127.0.0.1:{server.port}/0", prefix=prefix, registry=Registry())
        passed_in = redis.Redis(host="127.0.0.1", port=server.port, username="default", password="s3cret-pass", decode_responses=True)
        by_client = create_client(redis=passed_in, prefix=prefix, registry=Registry())
        try:
            for c, shown in (
                (by_url, f"redis://***@127.0.0.1:{server.port}/0"),
                (by_client, f"redis://default:***@127.0.0.1:{server.port}/0"),
            ):
                with pytest.raises(UnknownWorkflowError) as unknown:
                    c.run("place-order", {})
                assert f"synced to {shown} under prefix" in str(unknown.value) and "s3cret" not in str(unknown.value)
        finally:
            by_url.close()
            by_client.close()
            passed_in.close()
