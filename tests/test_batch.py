"""A batch sends its scripts (FCALLs of redflow's library) in one round trip,
and loads the library again where Redis lost it (a restart, FUNCTION FLUSH, a new master)."""

from redflow.bench.probe import Probe, server_delta


def test_a_batch_of_scripts_is_one_round_trip_without_script_exists(client, redis_url):
    probe = Probe(redis_url)
    client.scripts.load_all()
    before = probe.sample()
    batch = client.scripts.batch()
    for n in range(5):
        client.scripts.renew_run_lease(run_id=f"run_{n}", queue="default", token="t", lease_ms=1000, conn=batch)
    assert batch.execute() == [False] * 5
    delta = server_delta(before, probe.sample())
    probe.close()
    assert delta.trips == 1 and delta.commands.get("function|load", 0) == 0 and delta.commands["fcall"] == 5


def test_a_script_redis_lost_is_loaded_again_and_its_reply_parsed(client, r):
    r.set(client.keys.run_lease("run_x"), "t")
    r.function_flush()
    batch = client.scripts.batch()
    client.scripts.renew_run_lease(run_id="run_x", queue="default", token="t", lease_ms=5000, conn=batch)
    batch.get(client.keys.run_lease("run_x"))
    assert batch.execute() == [True, "t"] and 0 < r.pttl(client.keys.run_lease("run_x")) <= 5000
