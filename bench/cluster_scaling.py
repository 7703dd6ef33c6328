"""Runs/s on one Redis vs a 3-master Redis Cluster, on this machine.

    .venv/bin/python bench/cluster_scaling.py [-n 15000] [-c 500] [--json out.json]

Each setup gets the same load: ``n`` no-op runs spread over three queues
(on the cluster: queues whose slots belong to three different masters),
drained by one in-process ``-c`` worker. Queues are the unit of scale in
cluster mode (see redflow/core/keys.py), so the cluster can only help a load that
spans several queues.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import gevent  # noqa: E402
import orjson  # noqa: E402

from redflow import Registry, create_client, define_workflow, start_worker  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402
from redflow.testing.cluster import RedisClusterHarness  # noqa: E402


def drain(url: str, queues: list[str], total: int, concurrency: int) -> float:
    registry = Registry()
    for queue in queues:
        define_workflow(f"noop-{queue}", queue=queue, registry=registry)(lambda ctx: None)
    prefix = f"scale:{uuid.uuid4().hex[:8]}"
    client = create_client(url, prefix=prefix, registry=registry)
    try:
        for index, queue in enumerate(queues):
            client.run_many(f"noop-{queue}", [None] * (total // len(queues) + (index < total % len(queues))))
        worker = start_worker(registry, url=url, prefix=prefix, concurrency=concurrency, cron=False)
        began = time.perf_counter()
        while client.count_runs("succeeded") < total:
            gevent.sleep(0.02)
        elapsed = time.perf_counter() - began
        worker.stop(timeout=10)
        return total / elapsed
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=15000)
    parser.add_argument("-c", "--concurrency", type=int, default=500)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    results = {}
    with RedisServer() as single:
        results["single Redis, 1 queue"] = drain(single.url, ["q0"], args.n, args.concurrency)
        results["single Redis, 3 queues"] = drain(single.url, ["q0", "q1", "q2"], args.n, args.concurrency)
    cluster = RedisClusterHarness().start()
    try:
        from redflow.core.keys import Keys

        queues = cluster.queues_on_distinct_masters(Keys(cluster=True))
        results["3-master cluster (with replicas), 3 queues"] = drain(cluster.url, queues, args.n, args.concurrency)
        results["3-master cluster, 1 queue"] = drain(cluster.url, queues[:1], args.n, args.concurrency)
    finally:
        cluster.cleanup()
    for name, rate in results.items():
        print(f"{name:45s} {rate:8.0f} runs/s")
    if args.json:
        with open(args.json, "wb") as out:
            out.write(orjson.dumps({"n": args.n, "concurrency": args.concurrency, "runs_per_s": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
