"""How the chaos tests set things up: servers, worker processes, hand-written runs, fault scenarios.

Proofs about the outcome live in :mod:`tests.chaos.kit`; this module only
arranges the world they are checked against.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers import WorkerProcess, wait_until
from redis.exceptions import RedisError

from redflow.core import clock, codec
from redflow.testing import RedisServer
from tests.chaos.kit import SideCounts

#: Keyspace events :class:`~tests.chaos.kit.FinalizeWitness` needs: K (keyspace channel) + l (list commands).
NOTIFY_ARGS = ("--notify-keyspace-events", "Kl")


# -- servers and worker subprocesses --------------------------------------------------------


def start_server(**options: Any) -> RedisServer:
    """A private redis-server (``RedisServer`` options); a clear test failure, never a skip, if it can't start."""
    server = RedisServer(**options)
    try:
        return server.start()
    except Exception as exc:
        server.cleanup()
        pytest.fail(f"cannot start a private redis-server: {exc}", pytrace=False)


class Workers:
    """The ``redflow-gevent worker`` subprocesses of one test (tests/helpers.py ``WorkerProcess``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.spawned: list[WorkerProcess] = []

    def spawn(
        self,
        url: str,
        *extra: str,
        app: str = "crash_app",
        concurrency: int = 8,
        lease_ms: int = 1000,
        ready: bool = True,
        wrapper: Sequence[str] = (),
    ) -> WorkerProcess:
        """Start a worker on ``tests.chaos.apps.<app>:registry``; ``ready``: wait until it serves;
        ``wrapper``: a command to run it under (``faketime``)."""
        worker = WorkerProcess(url, self.prefix, *extra, concurrency=concurrency, app=f"tests.chaos.apps.{app}:registry",
                               lease_ms=lease_ms, wrapper=wrapper)  # fmt: skip
        self.spawned.append(worker)
        if ready:
            wait_ready(worker)
        return worker

    def close(self, *, show_logs: bool) -> None:
        for worker in self.spawned:
            worker.kill()
            if show_logs:
                tail = "\n".join(worker.output().splitlines()[-40:])
                print(f"--- worker pid {worker.proc.pid} (exit {worker.proc.returncode}), last lines ---\n{tail}")
            worker.log.close()
            os.unlink(worker.log.name)


def wait_ready(worker: WorkerProcess, timeout: float = 60.0) -> None:
    """Wait until the worker logged that it started (or fail with its output if it exited)."""
    wait_until(lambda: "worker started" in worker.output() or worker.proc.poll() is not None, timeout=timeout,
               interval=0.05, message="the worker to start")  # fmt: skip
    if worker.proc.poll() is not None:
        raise AssertionError(f"worker exited with {worker.proc.returncode} before serving:\n{worker.output()[-3000:]}")


def restart(server: RedisServer, r: redis.Redis, *, down_s: float, crash: bool = False) -> None:
    """Stop (SIGTERM) or crash (SIGKILL) a redis-server, keep it down ``down_s``, start it on the
    same port and wait until it serves (``RedisServer.start`` returns while it still loads)."""
    if crash:
        server.kill()
    else:
        server.stop()
    time.sleep(down_s)
    server.start()

    def serving() -> bool:
        try:
            return bool(r.ping())
        except (RedisError, OSError):  # LOADING, or a pooled connection of the old process
            return False

    wait_until(serving, timeout=60, interval=0.05, message="redis-server to serve again")


def alive(worker: WorkerProcess) -> bool:
    return worker.proc.poll() is None


#: What a worker logs when it takes the cron leader's lock, and when it loses it.
LEADS_CRON = "cron: this worker leads the cron triggers and schedules"
NO_LONGER_LEADS = "cron: this worker no longer leads"


def leads_cron(worker: WorkerProcess) -> bool:
    """The worker is alive and leads the cron now, by its log (took the lock, not lost since)."""
    out = worker.output()
    return alive(worker) and out.rfind(LEADS_CRON) > out.rfind(NO_LONGER_LEADS)


# -- runs written by hand, as another client (or a hostile producer) writes them ---------------


def new_run_id() -> str:
    return f"run_{uuid.uuid4()}"


def write_run(r: redis.Redis, keys: Any, run_id: str, workflow: str = "echo", fields: dict[str, Any] | None = None,
              *, into: str = "ready") -> str:  # fmt: skip
    """A queued run in the DATA_MODEL.md layout; a field given as None is left out. ``r`` may be a
    bytes client (values written byte for byte). ``into="processing"``: as a worker that died just
    after claiming it left it (no lease)."""
    now = clock.now_ms()
    mapping = {"workflow": workflow, "queue": "default", "status": "queued", "inputJson": '{"n":1}', "attempt": "0",
               "maxAttempts": "3", "createdAt": str(now), "cancelRequestedAt": "", "cancelReason": "",
               "waiters": "1"}  # fmt: skip  # waited for: each finalization pushes a token the witness counts
    mapping.update(fields or {})
    r.hset(keys.run(run_id), mapping={name: value for name, value in mapping.items() if value is not None})
    r.zadd(keys.runs_created(), {run_id: now})
    if mapping["status"] is not None:
        r.zadd(keys.runs_status("queued"), {run_id: now})
    r.lpush(keys.queue_ready("default") if into == "ready" else keys.queue_processing("default"), run_id)
    return run_id


#: A queue entry that is not UTF-8 (a binary pickle, as a hostile or broken producer pushes it).
BINARY_ENTRY = pickle.dumps({"not": "a run id"}, protocol=pickle.HIGHEST_PROTOCOL)


class LeavesAMarker:
    """Unpickling this runs ``os.system``: the marker file proves whether anyone did."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def pickle_input_is_rejected_as_bad_json(url: str, keys: Any, protocol: int) -> None:
    """Queue a run whose inputJson is a pickle with a ``__reduce__`` payload; it must fail as bad JSON, unpickled."""
    marker = Path(os.environ.get("TMPDIR", "/tmp")) / f"redflow-unpickled-{uuid.uuid4().hex}"
    raw = redis.Redis.from_url(url)  # bytes in, byte for byte
    run_id = new_run_id()
    try:
        write_run(raw, keys, run_id, fields={"inputJson": pickle.dumps(LeavesAMarker(marker), protocol=protocol),
                                             "maxAttempts": "1"})  # fmt: skip
        wait_until(lambda: raw.hget(keys.run(run_id), "status") == b"failed", timeout=30, message="the run to fail")
        error = codec.loads(raw.hget(keys.run(run_id), "errorJson"))
        assert error["name"] == "CorruptDataError" and "inputJson is not valid JSON" in error["message"]
        assert not marker.exists(), "the payload was unpickled"
    finally:
        raw.close()


def error_of(fields: dict[str, str]) -> dict:
    """The decoded ``errorJson`` of a run hash."""
    return codec.loads(fields["errorJson"])


# -- the module-wide bench of the bad-input tests -------------------------------------------------


#: Queue entries that name no runnable run: no hash at all, or a hash without a status.
UNRUNNABLE_ENTRIES = ["no-such-run", "run-hash-without-status"]


@dataclass
class Bench:
    """One engine Redis and one worker process shared by a module of bad-input tests."""

    url: str
    prefix: str
    client: Any
    r: redis.Redis
    side: SideCounts
    worker: WorkerProcess

    @property
    def keys(self) -> Any:
        return self.client.keys

    def write_run(self, run_id: str, workflow: str = "echo", fields: dict[str, Any] | None = None) -> str:
        return write_run(self.r, self.keys, run_id, workflow, fields)

    def wait_terminal(self, run_id: str, timeout: float = 30) -> dict[str, str]:
        wait_until(lambda: self.r.hget(self.keys.run(run_id), "status") in ("succeeded", "failed", "canceled"),
                   timeout=timeout, message=f"run {run_id} to end")  # fmt: skip
        return self.r.hgetall(self.keys.run(run_id))

    def in_queue(self, run_id: str) -> bool:
        k = self.keys
        return any(run_id in self.r.lrange(key, 0, -1) for key in (k.queue_ready("default"), k.queue_processing("default")))

    def push_unrunnable(self, case: str) -> tuple[str, dict[str, str]]:
        """A queue entry the worker cannot run (one of :data:`UNRUNNABLE_ENTRIES`); returns its id and hash."""
        run_id = new_run_id()
        if case == "no-such-run":
            self.r.lpush(self.keys.queue_ready("default"), run_id)
        else:
            self.write_run(run_id, fields={"status": None})
        return run_id, self.r.hgetall(self.keys.run(run_id))

    def still_serves(self) -> None:
        """The same worker process is alive and runs the canary."""
        assert alive(self.worker), f"the worker died:\n{self.worker.output()[-3000:]}"
        output = self.client.run("echo", {"canary": True}).result(timeout=30)
        assert output["pid"] == self.worker.proc.pid


# -- fault scenarios shared by several tests ------------------------------------------------------

HOLD_S = 3.0  # step b's first execution: longer than the lease, shorter than the freeze


@dataclass
class Resumed:
    """A run finished by a new owner while its old worker was frozen, seen after the old one woke."""

    run_id: str
    old: WorkerProcess
    new: WorkerProcess
    output: dict
    run_at_finish: dict
    steps_at_finish: dict


def freeze_past_the_lease_and_resume(
    url: str, er: redis.Redis, client: Any, workers: Workers, side: SideCounts, *, hold: str = "step"
) -> Resumed:
    """SIGSTOP the worker inside step b (``hold="between"``: in the handler between steps a and b);
    another worker takes the run over once the lease expired and finishes it; then SIGCONT the old
    one, after its sleep is over, and let it do what it does."""
    keys = client.keys
    old = workers.spawn(url)
    handle = client.run("journey", {"hold": hold, "hold_s": HOLD_S})
    if hold == "step":
        wait_until(lambda: side.step("b", handle.id) == 1, timeout=20, message="step b to start")
    else:
        wait_until(lambda: er.hexists(keys.run_steps(handle.id), "a"), timeout=20, message="step a to be recorded")
    old.signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        new = workers.spawn(url)
        output = handle.result(timeout=30)
        run_at_finish = er.hgetall(keys.run(handle.id))
        steps_at_finish = er.hgetall(keys.run_steps(handle.id))
        time.sleep(max(0.0, HOLD_S + 0.5 - (time.monotonic() - frozen_at)))
    finally:
        old.signal(signal.SIGCONT)
    wait_until(lambda: f"lease lost for run {handle.id}" in old.output() or "another worker owns it now" in old.output(),
               timeout=10, message="the old worker to notice")  # fmt: skip
    time.sleep(1.0)  # whatever the old worker still does, it has done it now
    return Resumed(handle.id, old, new, output, run_at_finish, steps_at_finish)
