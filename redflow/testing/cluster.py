"""A private Redis Cluster for tests and benchmarks: 3 masters with a replica each.

:class:`RedisClusterHarness` starts real redis-server processes with
``--cluster-enabled yes`` on free loopback ports (Redis wants ports up to
55535, with the cluster bus port at +10000 free too), joins them with
``redis-cli --cluster create``, and can fail a master over to its replica.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time

import redis
from redis.cluster import RedisCluster

from redflow.core.keys import Keys
from redflow.testing import RedisServer

CLUSTER_NODE_TIMEOUT_MS = 2000


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (+10000) is free too; Redis needs it <= 55535."""
    while True:
        port = random.randint(20000, 45000)
        if port not in taken and port + 10000 not in taken and _bindable(port) and _bindable(port + 10000):
            taken.update((port, port + 10000))
            return port


class RedisClusterHarness:
    """Six redis-server processes joined by ``redis-cli --cluster create``."""

    def __init__(self, masters: int = 3, replicas_per_master: int = 1) -> None:
        self.replicas_per_master = replicas_per_master
        self.servers = []
        taken: set[int] = set()
        for _ in range(masters * (1 + replicas_per_master)):
            port = cluster_port(taken)
            self.servers.append(
                RedisServer(
                    port=port,
                    extra_args=[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        f"nodes-{port}.conf",
                        "--cluster-node-timeout",
                        str(CLUSTER_NODE_TIMEOUT_MS),
                    ],
                )  # fmt: skip
            )

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers[:3])

    def start(self) -> RedisClusterHarness:
        for server in self.servers:
            server.start()
        nodes = [f"127.0.0.1:{s.port}" for s in self.servers]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", str(self.replicas_per_master), "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        self.wait_healthy()
        return self

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, decode_responses=True)

    def roles(self) -> dict[int, tuple[str, int | None]]:
        """port -> (role, port of its master for replicas) as the cluster sees it now."""
        with self.node(self.servers[0].port) as node:
            nodes = node.execute_command("CLUSTER NODES")  # "host:port" -> node info
        port_of = {info["node_id"]: int(addr.split("@")[0].rsplit(":", 1)[1]) for addr, info in nodes.items()}
        out: dict[int, tuple[str, int | None]] = {}
        for info in nodes.values():
            role = "master" if "master" in info["flags"] else "replica"
            out[port_of[info["node_id"]]] = (role, port_of.get(info["master_id"]) if role == "replica" else None)
        return out

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ok, replication = True, []
                for server in self.servers:
                    with self.node(server.port) as node:
                        ok = ok and node.execute_command("CLUSTER INFO")["cluster_state"] == "ok"
                        replication.append(node.info("replication"))
            except redis.RedisError:
                time.sleep(0.1)
                continue
            synced = all(r.get("master_link_status", "up") == "up" for r in replication if r.get("role") == "slave")
            if ok and synced:
                return
            time.sleep(0.1)
        raise RuntimeError("the Redis Cluster did not become healthy")

    def queues_on_distinct_masters(self, keys: Keys, count: int = 3) -> list[str]:
        """Queue names (``q0``, ``q1``, ...) whose hash slots belong to ``count`` different masters."""
        chosen, masters = [], set()
        for index in range(1000):
            name = f"q{index}"
            master = self.master_of(keys.queue_ready(name))
            if master not in masters:
                masters.add(master)
                chosen.append(name)
                if len(chosen) == count:
                    return chosen
        raise RuntimeError(f"could not find {count} queues on distinct masters")

    def master_of(self, key: str) -> int:
        client = RedisCluster(host="127.0.0.1", port=self.servers[0].port, decode_responses=True)
        try:
            port: int = client.nodes_manager.get_node_from_slot(client.keyslot(key)).port  # type: ignore[no-untyped-call]
            return port
        finally:
            client.close()

    def failover_master_of(self, key: str, timeout: float = 30.0) -> tuple[int, int]:
        """Promote the replica of the master that owns ``key``'s slot (CLUSTER FAILOVER);
        returns (old master port, new master port) once the cluster is healthy again."""
        old_master = self.master_of(key)
        replica = next(port for port, (role, master) in self.roles().items() if role == "replica" and master == old_master)
        with self.node(replica) as node:
            node.execute_command("CLUSTER FAILOVER")
        deadline = time.monotonic() + timeout
        while self.roles().get(replica, ("",))[0] != "master":
            if time.monotonic() > deadline:
                raise RuntimeError("CLUSTER FAILOVER did not complete")
            time.sleep(0.05)
        self.wait_healthy()
        return old_master, replica

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()
