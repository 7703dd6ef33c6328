"""Instructions Redis executes per run on the saturated hot path, counted with callgrind.

    .venv/bin/python bench/redis_instructions.py [-n 2000] [--redis-server PATH]

Seconds of CPU move by ±25 % on a shared machine; instruction counts do not
(the same count twice, whatever else runs), so this is how a change to the
Lua is compared with the commit before it. A redis-server runs under
``valgrind --tool=callgrind``; ``n`` no-op runs are enqueued, 500 are
claimed, and then each is settled with ``settle_run`` while it claims and
starts the next one (the path of a busy ``-c 500`` worker), in pipelines of
500. Only the settles are counted (``callgrind_control -z`` before them,
``-d`` after): Redis's instructions for reading the requests, running the
functions and writing the replies, divided by the runs settled. Needs
valgrind (Debian's package). ``--keep`` leaves the callgrind file for
``callgrind_annotate`` (a redis-server built with symbols names functions).
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
import uuid

import redis

from redflow import Registry, create_client, define_workflow
from redflow.store.batch import Batch
from redflow.store.requests import SettleRequest
from redflow.testing import free_port, redis_server_binary

IN_FLIGHT = 500
LEASE_MS = 600_000


def settle_round(client, batch: Batch, in_flight: list[tuple[str, str]], now: int) -> list[tuple[str, str]]:
    """Settle every run in flight, each claiming the next: the new runs in flight."""
    tokens = [uuid.uuid4().hex for _ in in_flight]
    for (run_id, token), next_token in zip(in_flight, tokens):
        request = SettleRequest(run_id, "default", "succeeded", token, LEASE_MS, now, output_json="null", next_token=next_token,
                                check_lease=False, cleanup=False)  # fmt: skip
        client.scripts.settle_run(request, conn=batch)
    return [(settled.next.run_id, token) for settled, token in zip(batch.execute(), tokens) if settled.next]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="runs settled while counting")
    parser.add_argument("--redis-server", default=None, help="the redis-server binary (default: the one tests use)")
    parser.add_argument("--keep", action="store_true", help="keep the callgrind output file")
    args = parser.parse_args()
    out = tempfile.mkdtemp(prefix="redflow-callgrind-")
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no", f"--callgrind-out-file={out}/callgrind.%p",
         args.redis_server or redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        for _ in range(600):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        registry = Registry()
        define_workflow("noop", registry=registry)(lambda ctx: None)
        client = create_client(url=url, prefix="bench", registry=registry)
        for _ in range(0, args.n + 2 * IN_FLIGHT, 500):
            client.run_many("noop", [None] * 500)
        now, batch = client.now_ms(), Batch(client.redis)
        tokens = [uuid.uuid4().hex for _ in range(IN_FLIGHT)]
        for token in tokens:
            client.scripts.take_run(queue="default", token=token, lease_ms=LEASE_MS, now_ms=now, conn=batch)
        in_flight = settle_round(client, batch, [(c.run_id, t) for c, t in zip(batch.execute(), tokens)], now)  # warm
        subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True, capture_output=True)
        settled = 0
        while settled < args.n:
            settled += len(in_flight)
            in_flight = settle_round(client, batch, in_flight, now)
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True, capture_output=True)
        time.sleep(0.5)
        dump = max(glob.glob(f"{out}/callgrind.*"), key=os.path.getmtime)
        total = next(int(line.split()[1]) for line in open(dump) if line.startswith(("summary:", "totals:")))
        print(f"{total / settled:,.0f} Redis instructions per run ({settled} runs settled, each claiming the next)")
        if args.keep:
            print(f"callgrind output: {dump}")
        return 0
    finally:
        r.close()
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
