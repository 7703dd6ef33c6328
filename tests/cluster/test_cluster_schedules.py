"""Schedules as data on Redis Cluster: the writes and bad input (tests/test_schedules.py),
the ticks, overlap, catch-up, jitter, trigger and the leader interleavings
(tests/test_schedule_ticks.py), and the command line (tests/test_schedule_commands.py).

A schedule's keys share the hash tag ``{schedules}`` (its scripts touch its
hash and both indexes: test_cluster.py checks their slots); the runs it starts
live in their queue's slot, where the leader looks up a tick's idempotency key.
"""

from test_schedule_commands import *  # noqa: F401,F403
from test_schedule_ticks import *  # noqa: F401,F403
from test_schedules import *  # noqa: F401,F403
