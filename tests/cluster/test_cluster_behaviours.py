"""The worker behaviour suite (tests/test_worker, test_steps, test_loops, test_hooks, test_waits,
test_event_delivery), on Redis Cluster.

The fixtures of tests/cluster/conftest.py point every client and worker of
these tests at a 3-master cluster. Two tests are left out on purpose: they
stop a single redis-server to prove backoff and lease-loss on an outage; on
a cluster, the failover test in test_cluster.py covers a master going away.
(Three tests, in fact: the third stops one server in the middle of a step.)
The round-trip count of an event nobody waits for is left out too: it reads
one server's counters.
"""

from test_event_delivery import *  # noqa: F401,F403
from test_hooks import *  # noqa: F401,F403
from test_loops import *  # noqa: F401,F403
from test_steps import *  # noqa: F401,F403
from test_waits import *  # noqa: F401,F403
from test_worker import *  # noqa: F401,F403

del test_lease_renewal_failures_stop_the_run  # noqa: F821 - single-server outage, see the docstring
del test_loops_back_off_while_redis_is_down_and_recover  # noqa: F821 - single-server outage
del test_redis_failing_while_a_step_is_recorded_abandons_the_attempt_without_failing_it  # noqa: F821 - single-server outage
del test_emitting_an_event_nobody_waits_for_is_one_round_trip  # noqa: F821 - one server's counters
