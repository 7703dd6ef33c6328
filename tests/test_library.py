"""redflow's Lua runs as one Redis Functions library (redflow/store/library.py).

What it must keep: every path that calls a script loads the library again
where Redis lost it (a worker's slot connections, the client's pool, a
batch), two versions of the library share a Redis, a library built with its
helpers out of order is refused when it is built, and the flags keep a full
Redis's answers (settling and reading go on, writing new work is refused).
"""

import pytest
import redis
from helpers import wait_until

from redflow import create_client, define_workflow
from redflow.store.catalog import FLAGS, HELPER_ORDER, LIBRARY, SCRIPTS
from redflow.store.catalog import lua as _lua
from redflow.store.library import Library
from redflow.store.requests import SettleRequest


def libraries(r: redis.Redis) -> dict[str, dict]:
    """FUNCTION LIST as {library name: {function name: set of flags}}."""
    found = {}
    for flat in r.function_list():
        entry = dict(zip(flat[::2], flat[1::2]))
        found[entry["library_name"]] = {fn[1]: set(fn[5]) for fn in entry["functions"]}
    return found


def loaded_libraries(r: redis.Redis) -> set[str]:
    return set(libraries(r))


def test_a_worker_and_a_client_load_the_library_again_after_redis_lost_it(start, registry, client, r):
    @define_workflow("twice", registry=registry)
    def twice(ctx):
        return ctx.step.run("double", lambda: ctx.input * 2)

    worker = start(concurrency=4)
    assert [twice.run(n, client=client).result(10) for n in range(3)] == [0, 2, 4]
    assert LIBRARY.name in loaded_libraries(r)
    r.function_flush()  # as a restart without persistence leaves it
    assert loaded_libraries(r) == set()
    handles = [twice.run(n, client=client) for n in range(20)]  # the client's enqueue loads it first
    assert [h.result(10) for h in handles] == [2 * n for n in range(20)]
    r.function_flush()  # now the worker's slots and lease keeper meet the loss first
    handles = client.run_many("twice", range(20))
    r.function_flush()
    assert [h.result(10) for h in handles] == [2 * n for n in range(20)]
    wait_until(lambda: worker.stats["succeeded"] == 43)
    assert worker.stats["abandoned"] == 0 and LIBRARY.name in loaded_libraries(r)


def test_two_versions_of_the_library_share_a_redis_without_replacing_each_other(client, r):
    older = Library(helpers=HELPER_ORDER, scripts=SCRIPTS, flags={**FLAGS, "unlock": ()}, read=_lua)
    assert older.name != LIBRARY.name and set(older.functions.values()).isdisjoint(LIBRARY.functions.values())
    older.load(r)
    client.scripts.load_all()
    assert {older.name, LIBRARY.name} <= loaded_libraries(r)
    client.scripts.load_all()  # loading the same version again changes nothing
    assert r.fcall(older.functions["unlock"], 1, f"{client.keys.prefix}:lock:x", "token") == 0
    r.function_delete(older.name)


def test_a_library_whose_helpers_are_out_of_order_or_missing_is_refused_when_it_is_built():
    with pytest.raises(ValueError, match=r"\w+: its helpers .* are not in the library's order"):
        Library(helpers=tuple(reversed(HELPER_ORDER)), scripts=SCRIPTS, flags=FLAGS, read=_lua)
    with pytest.raises(ValueError, match=r"settle_run: its helpers \['finalize'\] are not in the library's order"):
        Library(helpers=tuple(h for h in HELPER_ORDER if h != "finalize"), scripts=SCRIPTS, flags=FLAGS, read=_lua)


def test_each_script_is_one_function_with_the_flags_it_was_given(r, client):
    client.scripts.load_all()
    assert libraries(r)[LIBRARY.name] == {LIBRARY.functions[name]: set(FLAGS.get(name, ())) for name in SCRIPTS}


def test_a_full_redis_refuses_new_work_but_reads_and_settles(redis_servers, prefix, registry):
    from test_memory import fill, free, server

    full = server(redis_servers, "--maxmemory", "20mb", "--maxmemory-policy", "noeviction")
    r = redis.Redis.from_url(full.url, decode_responses=True)
    define_workflow("done", registry=registry)(lambda ctx: None)
    client = create_client(full.url, prefix=prefix, registry=registry)
    try:
        handle = client.run("done")
        claim = client.scripts.take_run(queue="default", token="t", lease_ms=60_000, now_ms=client.now_ms())
        assert claim is not None and claim.run_id == handle.id
        fillers = fill(r)
        walked = client.scripts.search_runs(
            walk=client.keys.workflow_runs("done"), probes=[], after=None, wanted=10, skip_budget=10, batch=10
        )
        assert [run_id for run_id, _ in walked.matches] == [handle.id]  # no-writes: a full Redis runs it
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.scripts.take_run(queue="default", token="t2", lease_ms=60_000, now_ms=client.now_ms())
        settled = client.scripts.settle_run(
            SettleRequest(handle.id, "default", "succeeded", "t", 60_000, client.now_ms(), output_json="1")
        )  # allow-oom: its first write is a deletion, as an EVAL script's was
        assert settled.status == "succeeded" and handle.result(1) == 1
        free(r, fillers)
    finally:
        client.close()
        r.close()
