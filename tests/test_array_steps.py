"""Step records as JSON arrays (the asyncio ``redflow`` package's form, 0.0.25
and later: core/step_arrays.py) in the worker.

- Read: a run whose steps a 0.1.x worker recorded (arrays, outputs possibly
  ``@blob:`` references) keeps them on our worker: succeeded steps replay,
  others run again with their seq.
- Written with ``compat="redflow-0.1"``: every record our worker writes (a
  step's end, the lease keeper's running marker, a durable wait's waiting
  record, an event delivered to it) is an array a 0.1.x worker reads, and
  our own worker replays them, waits included, as it replays objects.
"""

from __future__ import annotations

import gevent
import orjson
import pytest
from helpers import WorkerProcess, wait_until

from redflow import create_client, define_workflow
from redflow.core import blobs
from redflow.core.step_arrays import parse_step_array
from tests.apps import interop_app

COMPAT = {"compat": "redflow-0.1"}


@pytest.fixture
def compat_client(redis_url, prefix, registry):
    c = create_client(redis_url, prefix=prefix, registry=registry, **COMPAT)
    yield c
    c.close()


def records(r, client, run_id: str) -> dict[str, list]:
    """The run's step records, each decoded as an array (a failure if one is an object)."""
    raw = r.hgetall(client.keys.run_steps(run_id))
    return {name: orjson.loads(value) for name, value in raw.items()}


def as_array(record: list, name: str):
    return parse_step_array(record, what=name)


def test_array_records_another_worker_wrote_are_replayed_with_their_blobs(start, client, registry, r, prefix):
    calls = []

    @define_workflow("taken-over", registry=registry)
    def taken_over(ctx):
        a = ctx.step.run("a", lambda: calls.append("a") or "fresh a")
        b = ctx.step.run("b", lambda: calls.append("b") or "b again")
        return [a, b]

    handle = taken_over.run(None, client=client)
    big = orjson.dumps({"a": "z" * 3000}).decode()
    stored = blobs.encode(big, 1024)
    assert stored.blob is not None
    keys = client.keys
    r.hset(keys.run_blobs(handle.id), *stored.blob)
    # as a 0.1.x worker leaves a run it died in: "a" succeeded (its output a blob), "b" failed once
    a_record, b_record = orjson.dumps([1, 1, 1, stored.value]).decode(), '[2,2,1,"{\\"message\\":\\"x\\"}"]'
    r.hset(keys.run_steps(handle.id), mapping={"a": a_record, "b": b_record})
    r.hset(keys.run(handle.id), "attempt", "1")
    start()
    assert handle.result(10) == [{"a": "z" * 3000}, "b again"] and calls == ["b"]
    assert client.get_steps(handle.id)[1].seq == 2  # "b" kept its seq


def test_a_compat_worker_writes_every_step_record_as_an_array(start, compat_client, registry, r):
    @define_workflow("arrays", max_attempts=2, registry=registry)
    def arrays(ctx):
        ok = ctx.step.run("ok", lambda: {"big": "y" * 2000})
        if ctx.run.attempt == 1:
            try:
                ctx.step.run("boom", lambda: 1 / 0)
            except ZeroDivisionError:
                raise RuntimeError("retry") from None
        return ok["big"][:3]

    start(**COMPAT)
    handle = arrays.run(None, client=compat_client)
    assert handle.result(10) == "yyy"
    found = records(r, compat_client, handle.id)
    ok, boom = as_array(found["ok"], "ok"), as_array(found["boom"], "boom")
    assert (ok.status, ok.seq, ok.attempt) == ("succeeded", 1, 1) and ok.output is not None and ok.output.startswith("@blob:v1:")
    assert (boom.status, boom.seq, boom.attempt) == ("failed", 2, 1) and "ZeroDivisionError" in (boom.error or "")
    assert [(s.name, s.status) for s in compat_client.get_steps(handle.id)] == [("ok", "succeeded"), ("boom", "failed")]


def test_the_running_marker_of_a_long_step_is_an_array_and_the_end_replaces_it(start, compat_client, registry, r):
    @define_workflow("long-step", registry=registry)
    def long_step(ctx):
        return ctx.step.run("slow", lambda: gevent.sleep(0.6) or "done")

    start(**COMPAT, cancel_poll_ms=50)
    handle = long_step.run(None, client=compat_client)
    wait_until(lambda: r.hget(compat_client.keys.run_steps(handle.id), "slow"), timeout=10)
    marker = as_array(records(r, compat_client, handle.id)["slow"], "slow")
    assert (marker.status, marker.seq, marker.attempt) == ("running", 1, 1) and marker.started_at
    assert handle.result(10) == "done"
    assert as_array(records(r, compat_client, handle.id)["slow"], "slow").status == "succeeded"


def test_durable_waits_in_array_records_park_and_resume(start, compat_client, registry, r, prefix):
    @define_workflow("arr-child", registry=registry)
    def child(ctx):
        return ctx.input * 2

    @define_workflow("arr-waits", registry=registry)
    def waits(ctx):
        ctx.step.sleep("nap", 0.3)
        paid = ctx.step.wait_for_event("paid", "order.paid", match={"order": ctx.input})
        doubled = ctx.step.run_workflows("kids", child, [1, 2])
        return [paid, doubled]

    start(**COMPAT, concurrency=2)
    handle = waits.run(7, client=compat_client)
    wait_until(lambda: compat_client.get_run(handle.id).parked_for == "event", timeout=10)
    waiting = as_array(records(r, compat_client, handle.id)["paid"], "paid")
    assert waiting.status == "running"
    assert waiting.wait == {"kind": "event", "event": "order.paid", "match": {"order": 7}, "timeoutAt": None}
    nap = as_array(records(r, compat_client, handle.id)["nap"], "nap")
    assert nap.status == "succeeded"
    compat_client.emit_event("order.paid", {"order": 7})
    assert handle.result(15) == [{"order": 7}, [2, 4]]
    found = records(r, compat_client, handle.id)
    assert {name: as_array(record, name).status for name, record in found.items()} == dict.fromkeys(("nap", "paid", "kids"), "succeeded")
    assert orjson.loads(as_array(found["paid"], "paid").output or "") == {"order": 7}  # the deliverer kept the array form


def test_a_sleep_record_in_the_asyncio_packages_form_is_its_own_wait_for(start, compat_client, registry, r):
    """A sleeping step's array record puts the wake time in the slot where the
    asyncio package's ``wait_for`` keeps it, and carries no wait of ours."""

    @define_workflow("arr-nap", registry=registry)
    def nap(ctx):
        ctx.step.sleep("nap", 30)

    start(**COMPAT)
    handle = nap.run(None, client=compat_client)
    wait_until(lambda: compat_client.get_run(handle.id).parked_for == "sleep", timeout=10)
    (record,) = records(r, compat_client, handle.id).values()
    assert len(record) == 5 and record[0] == 0 and record[4] - record[3] == 30_000
    handle.cancel()


def test_a_compat_run_whose_worker_is_killed_keeps_its_steps_and_ends_once_on_another_worker(start, redis_url, prefix, r, monkeypatch):
    """Killed (SIGKILL) after step "a" (a 3,000-byte output: a blob, in an array record), the run is
    taken over when its lease expires: "a" replays from the blob, and its end is told once."""
    monkeypatch.setenv("REDIS_URL", redis_url)  # where the workflows of tests/apps/interop_app.py count steps
    calls = f"{prefix}:calls"
    with create_client(redis_url, prefix=prefix, registry=interop_app.registry, **COMPAT) as compat:
        with WorkerProcess(redis_url, prefix, "--compat", "redflow-0.1", app="tests.apps.interop_app:registry") as worker:
            handle = compat.run("interop-steps", {"calls": calls, "size": 3000, "hang": "redflow-gevent"})
            wait_until(lambda: (r.hget(compat.keys.run_steps(handle.id), "a") or "").startswith("[1,1,1,"), timeout=30)
            worker.kill()
        r.hset(compat.keys.run(handle.id), "inputJson", '{"calls":"%s","size":3000,"hang":"no"}' % calls)  # noqa: UP031
        start(interop_app.registry, **COMPAT)
        assert handle.result(30) == {"a_len": 3000, "by": "redflow-gevent"}
        assert r.hget(calls, "a") == "1"  # run once, by the killed worker; replayed from its blob by the other
        assert [fields["status"] for _, fields in r.xrange(compat.keys.run_terminal(handle.id))] == ["succeeded"]


def test_a_signal_wait_in_array_records_parks_is_woken_and_replays(start, compat_client, registry, r):
    @define_workflow("arr-signal", registry=registry)
    def approve(ctx):
        before = ctx.step.run("before", lambda: "b")
        return [before, ctx.step.wait_for_signal("approve", step="approval")]

    start(**COMPAT)
    handle = approve.run(None, client=compat_client)
    wait_until(lambda: compat_client.get_run(handle.id).parked_for == "signal", timeout=10)
    waiting = as_array(records(r, compat_client, handle.id)["approval"], "approval")
    assert waiting.status == "running" and waiting.wait == {"kind": "signal", "signal": "approve", "timeoutAt": None}
    assert compat_client.signal(handle.id, "approve", {"by": "ada"})
    assert handle.result(10) == ["b", {"by": "ada"}]
    taken = as_array(records(r, compat_client, handle.id)["approval"], "approval")
    assert taken.status == "succeeded" and orjson.loads(taken.output or "") == {"by": "ada"}
