"""A queue entry that is not UTF-8 (not a run id) is dropped from processing, with a log line.

Replies are decoded with ``errors="replace"``, so such an entry cannot be
removed by the name a decoded reply gives it; the worker and the reaper
remove it by its raw bytes in Lua (store/lua/purge_invalid_entries.lua) and say so.
"""

import time

import redis
from helpers import wait_until

from tests.chaos.harness import BINARY_ENTRY


def test_a_binary_queue_entry_is_dropped_from_processing_with_a_log_line(engine, workers, chaos_client):
    worker = workers.spawn(engine.url, app="bad_app")
    keys = chaos_client.keys
    with redis.Redis.from_url(engine.url) as raw:
        raw.lpush(keys.queue_ready("default"), BINARY_ENTRY)
        wait_until(lambda: raw.llen(keys.queue_ready("default")) == 0, timeout=10, message="the entry to be claimed")
        time.sleep(2.0)  # a few reaper scans
        assert raw.lrange(keys.queue_processing("default"), 0, -1) == []
    dropped = [line for line in worker.output().splitlines() if " WARNING " in line or " ERROR " in line]
    assert dropped, "the worker threw the entry away without a word"
