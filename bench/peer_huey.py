"""Huey's side of ``bench/peers.py``: a no-op task on the Redis storage of ``$REDIS_URL``.

Workers: ``python bench/peer_huey.py -k greenlet -w N -q``, which patches
with gevent first (Huey's greenlet workers need it and its consumer
command does not do it) and then runs ``huey_consumer peer_huey.huey``.
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import sys  # noqa: E402

from huey import RedisHuey  # noqa: E402

huey = RedisHuey("peers", url=os.environ["REDIS_URL"])


@huey.task()
def noop() -> None:
    """Nothing: what a job costs is the queue's own work (a None result is not stored)."""


if __name__ == "__main__":
    from huey.bin.huey_consumer import consumer_main

    sys.argv = [sys.argv[0], "peer_huey.huey", *sys.argv[1:]]
    consumer_main()
