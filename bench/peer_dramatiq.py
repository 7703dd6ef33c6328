"""Dramatiq's side of ``bench/peers.py``: a no-op actor on the Redis broker of ``$REDIS_URL``.

Workers: ``dramatiq-gevent peer_dramatiq --processes P --threads T`` with
``bench/`` on ``PYTHONPATH``; the bench enqueues with ``noop.send()``.
"""

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

broker = RedisBroker(url=os.environ["REDIS_URL"])
dramatiq.set_broker(broker)

#: The list of message ids a worker fetches from, and the hash of the messages (one field until acked).
QUEUE_KEY = "dramatiq:default"
MESSAGES_KEY = "dramatiq:default.msgs"


@dramatiq.actor(max_retries=0)
def noop() -> None:
    """Nothing: what a job costs is the queue's own work."""
