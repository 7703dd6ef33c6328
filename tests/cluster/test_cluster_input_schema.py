"""Input checked by name, emit_event all or nothing and the unknown-name error
(tests/test_input_schema.py), on Redis Cluster.

Left out: the command count of a run by name (it reads one server's
counters), the password test (it starts a single server of its own) and the
typo test's exact message (it names a single server's URL; the cluster's is
checked below).
"""

import pytest
from test_input_schema import *  # noqa: F401,F403
from test_input_schema import echo

from redflow import Registry, UnknownWorkflowError, create_client, define_workflow

del test_checking_input_by_name_costs_no_redis_command  # noqa: F821 - one server's counters
del test_the_redis_named_in_the_error_never_shows_its_password  # noqa: F821 - a single server of its own
del test_a_typo_gets_the_nearest_names_and_the_redis_and_prefix_searched  # noqa: F821 - a single server's URL


def test_an_unknown_name_on_a_cluster_names_the_cluster_and_the_nearest_name(client, redis_cluster, redis_url, prefix):
    deployed = Registry()
    define_workflow("place-order", registry=deployed)(echo)
    client.sync_registry(deployed)
    bare = create_client(redis_url, prefix=prefix, registry=Registry())
    try:
        with pytest.raises(UnknownWorkflowError) as typo:
            bare.run("plcae-order", {})
    finally:
        bare.close()
    ports = {str(server.port) for server in redis_cluster.servers}
    named = str(typo.value).split("synced to redis+cluster://", 1)[1].split(" under prefix", 1)[0]
    assert named and {node.rpartition(":")[2] for node in named.split(",")} <= ports
    assert str(typo.value).endswith(f"under prefix {prefix!r}); did you mean 'place-order'?")
