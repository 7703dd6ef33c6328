"""Output streams on Redis Cluster: the stream scripts touch one slot (the run's
stream and signal keys carry its queue's hash tag), and a reader follows a run
live with one XREAD over both keys."""

import gevent
from gevent.event import Event
from helpers import wait_until
from redis.crc import key_slot
from test_cluster import _Recorder

from redflow import define_workflow
from redflow.core.keys import Keys
from redflow.store.scripts import Scripts


class _StreamRecorder(_Recorder):
    """The recorder, with the replies of append_stream then read_stream."""

    def fcall(self, function, numkeys, *keys_and_args):
        super().fcall(function, numkeys, *keys_and_args)
        return ["written", "1-0", 0] if len(self.calls) == 1 else [""]


def test_the_stream_scripts_touch_keys_of_one_slot():
    rec = _StreamRecorder()
    keys = Keys("redflow:v1", cluster=True)
    scripts = Scripts(rec, keys)
    scripts.append_stream(run_id="run_1", queue="emails", token="t", attempt=1, position=1, record="{}", now_ms=1, max_items=10)
    scripts.read_stream(run_id="run_1", queue="emails", after="0-0", count=10, watch=True)
    assert len(rec.calls) == 2
    for called in rec.calls:
        assert len({key_slot(k.encode()) for k in called}) == 1, called
    # what settle_run.lua, cancel_run.lua and purge_run.lua build from the run key
    run_key = keys.run("run_1", "emails")
    built = [run_key + ":stream:signal", run_key + ":stream:pass:2", keys.run_stream_cursors("run_1", "emails")]
    assert built[:2] == [keys.run_stream_signal("run_1", "emails"), keys.run_stream("run_1", "emails", pass_number=2)]
    assert {key_slot(k.encode()) for k in built} == {key_slot(run_key.encode())}


def test_a_run_streams_and_a_reader_follows_it_live_on_a_cluster(start, client, registry, r):
    go = Event()

    @define_workflow("talk", queue="talk", registry=registry)
    def talk(ctx):
        ctx.stream("one")
        go.wait(30)
        ctx.stream("two")
        return "done"

    start()
    handle = client.run("talk", None)
    got = []
    reader = gevent.spawn(lambda: got.extend(item.value for item in handle.stream(timeout=60)))
    wait_until(lambda: got == ["one"], timeout=10)
    go.set()
    reader.get(timeout=30)
    assert got == ["one", "two"] and handle.result(5) == "done"
    assert [item.value for item in client.read_stream(handle.id)] == ["one", "two"]
    assert r.exists(client.keys.run_stream_signal(handle.id, "talk")) == 1
    assert client.purge(older_than=0) == 1
    assert r.exists(client.keys.run_stream(handle.id, "talk"), client.keys.run_stream_signal(handle.id, "talk")) == 0
