"""What interop with the asyncio ``redflow`` 0.1.x costs each script it touches,
counted by Redis (INFO commandstats), each path beside the same path without it:

- a ``@blob:`` input: one HSET at enqueue (its blob), one HMGET at the start (reading it);
- a ``@blob:`` output or error: one HSET at the settle;
- a run with ``parentRunId``: an XADD and a PEXPIRE (its terminal stream) at the settle or cancel that ends
  it, and (our client's, with ``compat=`` or ``app=``) one HSET at enqueue unless it has other
  fields beyond the data model's;
- runs without any of these: nothing (the scripts' other commands are the same).
"""

from __future__ import annotations

from collections import Counter

import pytest

from redflow.bench.probe import Probe, server_delta
from redflow.core import blobs
from redflow.core.keys import new_id
from redflow.store.port import Store
from redflow.store.requests import EnqueueRequest, SettleRequest

BIG = '{"text":"' + "z" * 3000 + '"}'


@pytest.fixture
def store(client) -> Store:
    client.store.scripts.load_all()
    return client.store


@pytest.fixture
def probe(redis_url):
    p = Probe(redis_url)
    yield p
    p.close()


def counted(probe: Probe, call) -> Counter[str]:
    before = probe.sample()
    call()
    return server_delta(before, probe.sample()).commands


def enqueue(store: Store, *, big: bool = False, marked: bool = False) -> str:
    run_id = new_id("run")
    stored = blobs.encode(BIG if big else "{}", 1024)
    request = EnqueueRequest("wf", "default", stored.value, 1, input_blob=stored.blob, mark_parent=marked)
    store.scripts.enqueue_run(request, run_id=run_id, created_at_ms=1)  # (no clock read in the window)
    return run_id


def test_an_input_by_reference_costs_its_enqueue_one_hset_and_its_start_one_hmget(store, probe):
    plain = counted(probe, lambda: enqueue(store))
    big = counted(probe, lambda: enqueue(store, big=True))
    assert big - plain == Counter({"hset": 1}) and plain - big == Counter()
    starts = {}
    for name in ("plain", "big"):  # the queue holds the plain run first, then the big one: claimed in that order
        starts[name] = counted(probe, lambda: store.scripts.take_run(queue="default", token=new_id("lease"), lease_ms=5000, now_ms=1))
    assert starts["big"] - starts["plain"] == Counter({"hmget": 1}) and starts["plain"] - starts["big"] == Counter()


TERMINAL_STREAM = {"xadd": 1, "pexpire": 1}


@pytest.mark.parametrize(
    ("big", "marked", "extra"), [(True, False, {"hset": 1}), (False, True, TERMINAL_STREAM), (True, True, {"hset": 1, **TERMINAL_STREAM})]
)
def test_a_settle_costs_one_hset_for_an_output_by_reference_and_two_commands_for_a_run_with_parent_run_id(store, probe, big, marked, extra):
    def settle(run_id: str, output: str) -> None:
        stored = blobs.encode(output, 1024)
        request = SettleRequest(run_id, "default", "succeeded", token, 5000, 2, output_json=stored.value, blob=stored.blob)
        assert store.scripts.settle_run(request).status == "succeeded"

    costs = []
    for with_interop in (False, True):
        run_id, token = enqueue(store, marked=marked and with_interop), new_id("lease")
        claim = store.scripts.take_run(queue="default", token=token, lease_ms=5000, now_ms=1)
        assert claim is not None and claim.run_id == run_id
        output = BIG if big and with_interop else "{}"
        costs.append(counted(probe, lambda run_id=run_id, output=output: settle(run_id, output)))
    assert costs[1] - costs[0] == Counter(extra) and costs[0] - costs[1] == Counter()


def test_a_cancel_costs_two_commands_for_a_run_with_parent_run_id_and_nothing_for_another(store, probe):
    costs = []
    for marked in (False, True):
        run_id = enqueue(store, marked=marked)
        cancel = lambda run_id=run_id: store.scripts.cancel_run(run_id=run_id, queue="default", now_ms=1, reason="", error_json="{}")  # noqa: E731
        costs.append(counted(probe, cancel))
    assert costs[1] - costs[0] == Counter(TERMINAL_STREAM) and costs[0] - costs[1] == Counter()


def test_marking_a_run_with_parent_run_id_costs_its_enqueue_one_hset_at_most(store, probe):
    """The field goes with the features' fields (tags, priority, ...): one HSET for all of them."""
    plain, marked = counted(probe, lambda: enqueue(store)), counted(probe, lambda: enqueue(store, marked=True))
    assert marked - plain == Counter({"hset": 1}) and plain - marked == Counter()
