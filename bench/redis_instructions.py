"""Instructions Redis executes per job, counted with callgrind: redflow-gevent and Dramatiq.

    .venv/bin/python bench/redis_instructions.py [-n 2000] [--only loop|drain|step] [--redis-server PATH] [--keep]
    .venv/bin/python bench/redis_instructions.py --cpu [-n 20000] [--reps 4]

Seconds of CPU move by ±25 % on a shared machine; instruction counts hardly
move (the same count twice, whatever else runs), so this is how a change to
the Lua is compared with the commit before it, and redflow's Redis work per
job with Dramatiq's. One redis-server runs under ``valgrind
--tool=callgrind`` and serves every measurement in turn (FLUSHALL between
them); each counts only its own window (``callgrind_control -z`` before it,
``-d`` after), divided by the jobs done in it. Two ways:

- **loop**: each system's hot path driven directly, one process, no worker.
  redflow: ``n`` no-op runs are enqueued, 500 claimed, then each is settled
  with ``settle_run`` while it claims and starts the next one (the path of a
  busy ``-c 500`` worker), in pipelines of 500. Dramatiq: ``n`` messages
  are sent, then a consumer with the prefetch of a 50-thread worker (100)
  fetches them and acks each one by one (each ack is its own call, as a
  Dramatiq worker thread sends it). Enqueues are not counted for either.
- **step** (redflow only): a first-time step's record, ``save_step`` as a
  worker sends it while its lease is fresh, per step.
- **drain**: the jobs drained by the real workers, as ``bench/peers.py``
  runs them (redflow-gevent ``-c 500``, one process; Dramatiq gevent, 2
  processes × 50): parked, the workers warmed up, handed over with one
  RENAME, counted until the last is done: every command of the workers in
  that window (their background loops too) and the bench's polling. The
  redflow worker is started with leases of 10 minutes: under callgrind each
  run is in flight ~50× longer than at full speed, and the lease keeper
  would check every in-flight run's cancel flag each 100 ms, work it never
  does for runs shorter than a tick at full speed.

Instructions are user space only. What Redis spends in the kernel per
request (reading it, writing the reply: about 11-13 µs of system CPU per
Dramatiq job, one request each; under 1 µs per redflow run, 0.01-0.03
requests each) is not in them, so their ratio overstates the ratio of CPU
seconds. ``--cpu`` runs the same loops on a native redis-server instead,
reps interleaved, and prints ``used_cpu_user`` and ``used_cpu_sys`` per job.

Needs valgrind (Debian's package) and the ``[peers]`` extra for Dramatiq.
``--keep`` leaves the callgrind files for ``callgrind_annotate`` (a
redis-server built with symbols names functions). ``--worker PREFIX`` is the
redflow worker the drain starts (not for use by hand).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import glob  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Protocol  # noqa: E402

import gevent  # noqa: E402
import redis  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peers  # noqa: E402

from redflow import Registry, create_client, define_workflow  # noqa: E402
from redflow.bench import app as bench_app  # noqa: E402
from redflow.bench.probe import Probe  # noqa: E402
from redflow.store.batch import Batch  # noqa: E402
from redflow.store.requests import SettleRequest  # noqa: E402
from redflow.testing import free_port, redis_server_binary  # noqa: E402

IN_FLIGHT = 500
LEASE_MS = 600_000
DRAMATIQ_PREFETCH = 100  # a Dramatiq worker of 50 threads prefetches 2 per thread
WARM = 200


class Meter(Protocol):
    """What the loops count with: the server's URL, and a window to begin and end."""

    url: str
    counted: int

    def begin(self) -> None: ...
    def end(self) -> None: ...


class Callgrind:
    """A redis-server under callgrind; :meth:`begin` / :meth:`end` count one window."""

    def __init__(self, binary: str | None, keep: bool) -> None:
        self.out = tempfile.mkdtemp(prefix="redflow-callgrind-")
        self.keep = keep
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no", f"--callgrind-out-file={self.out}/callgrind.%p",
             binary or redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.redis = redis.Redis.from_url(self.url, decode_responses=True)
        self.counted = 0
        self.dumps: list[str] = []
        for _ in range(600):
            try:
                self.redis.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)

    def _control(self, flag: str) -> None:
        subprocess.run(["callgrind_control", flag, str(self.server.pid)], check=True, capture_output=True)

    def begin(self) -> None:
        self._control("-z")

    def end(self) -> None:
        """Dump the window; ``counted`` is its instructions."""
        before = set(glob.glob(f"{self.out}/callgrind.*"))
        self._control("-d")
        deadline = time.monotonic() + 30
        while not (set(glob.glob(f"{self.out}/callgrind.*")) - before) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # written in full
        dump = max(set(glob.glob(f"{self.out}/callgrind.*")) - before, key=os.path.getmtime)
        self.dumps.append(dump)
        with open(dump, encoding="utf-8", errors="replace") as lines:
            self.counted = next(int(line.split()[1]) for line in lines if line.startswith(("summary:", "totals:")))

    def close(self) -> None:
        self.redis.close()
        self.server.terminate()
        self.server.wait()


@dataclass(frozen=True)
class Count:
    system: str
    way: str  # "loop" or "drain"
    instructions: int
    jobs: int
    commands: int | None = None  # Redis commands in the window (drains)

    @property
    def per_job(self) -> float:
        return self.instructions / self.jobs


# -- loops --------------------------------------------------------------------------


def _settle_round(client, batch: Batch, in_flight: list[tuple[str, str]], now: int) -> list[tuple[str, str]]:
    """Settle every run in flight, each claiming the next: the new runs in flight."""
    tokens = [uuid.uuid4().hex for _ in in_flight]
    for (run_id, token), next_token in zip(in_flight, tokens):
        request = SettleRequest(run_id, "default", "succeeded", token, LEASE_MS, now, output_json="null", next_token=next_token,
                                check_lease=False, cleanup=False)  # fmt: skip
        client.scripts.settle_run(request, conn=batch)
    return [(settled.next.run_id, token) for settled, token in zip(batch.execute(), tokens) if settled.next]


def redflow_loop(meter: Meter, n: int) -> Count:
    registry = Registry()
    define_workflow("noop", registry=registry)(lambda ctx: None)
    client = create_client(url=meter.url, prefix="bench", registry=registry)
    try:
        for _ in range(0, n + 2 * IN_FLIGHT, 500):
            client.run_many("noop", [None] * 500)
        now, batch = client.now_ms(), Batch(client.redis)
        tokens = [uuid.uuid4().hex for _ in range(IN_FLIGHT)]
        for token in tokens:
            client.scripts.take_run(queue="default", token=token, lease_ms=LEASE_MS, now_ms=now, conn=batch)
        in_flight = _settle_round(client, batch, [(c.run_id, t) for c, t in zip(batch.execute(), tokens)], now)  # warm
        meter.begin()
        settled = 0
        while settled < n:
            settled += len(in_flight)
            in_flight = _settle_round(client, batch, in_flight, now)
        meter.end()
        return Count("redflow-gevent", "loop", meter.counted, settled)
    finally:
        client.close()


def dramatiq_loop(meter: Meter, n: int) -> Count:
    import peer_dramatiq  # its broker connects to $REDIS_URL

    consumer = peer_dramatiq.broker.consume(peer_dramatiq.QUEUE_KEY.split(":", 1)[1], prefetch=DRAMATIQ_PREFETCH, timeout=100)
    for _ in range(n + DRAMATIQ_PREFETCH):
        peer_dramatiq.noop.send()

    def ack(count: int) -> None:
        done = 0
        for message in consumer:
            if message is not None:
                consumer.ack(message)
                done += 1
                if done == count:
                    return

    ack(DRAMATIQ_PREFETCH)  # warm: the script loaded, the first fetch made
    meter.begin()
    ack(n)
    meter.end()
    consumer.close()
    return Count("Dramatiq", "loop", meter.counted, n)


# -- the same loops on a native redis-server: CPU seconds, user and system ------------------


class CpuMeter:
    """A native redis-server's ``used_cpu_user`` / ``used_cpu_sys`` and requests read over a window."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.counted = 0
        self.redis = redis.Redis.from_url(url, decode_responses=True)
        self.window: tuple[float, float, int] = (0.0, 0.0, 0)

    def _sample(self) -> tuple[float, float, int]:
        info = self.redis.info("everything")
        return float(info["used_cpu_user"]), float(info["used_cpu_sys"]), int(info["total_reads_processed"])

    def begin(self) -> None:
        self._before = self._sample()

    def end(self) -> None:
        after = self._sample()
        self.window = (after[0] - self._before[0], after[1] - self._before[1], after[2] - self._before[2] - 1)


def cpu_loops(n: int, reps: int) -> str:
    """Both loops ``reps`` times, interleaved, on a native redis-server: Redis's CPU per job, user and system."""
    from redflow.testing import RedisServer

    rows: dict[str, list[tuple[float, float, float]]] = {"redflow-gevent": [], "Dramatiq": []}
    with RedisServer() as server:
        meter = CpuMeter(server.url)
        os.environ["REDIS_URL"] = server.url
        for rep in range(reps):
            for loop in (redflow_loop, dramatiq_loop)[:: 1 if rep % 2 == 0 else -1]:
                meter.redis.flushall()
                count = loop(meter, n)
                user_s, sys_s, reads = meter.window
                rows[count.system].append((user_s * 1e6 / count.jobs, sys_s * 1e6 / count.jobs, reads / count.jobs))
        meter.redis.close()
    lines = ["| loop | Redis user CPU µs/job | system CPU µs/job | both | requests read/job |", "|---|---|---|---|---|"]
    medians = {}
    for system, values in rows.items():
        user, sys_, reads = (statistics.median(column) for column in zip(*values))
        medians[system] = user + sys_
        lines.append(f"| {system} | {user:.1f} | {sys_:.1f} | {user + sys_:.1f} | {reads:.3f} |")
    ratio = medians["redflow-gevent"] / medians["Dramatiq"]
    return "\n".join([*lines, "", f"redflow-gevent ÷ Dramatiq, CPU (user + system), medians of {reps} interleaved reps: **{ratio:.2f}×**"])


# -- drains by the real workers ---------------------------------------------------------


class SlowRedisRedflow(peers.Redflow):
    """bench/peers.py's redflow worker, with leases long enough for a Redis under callgrind."""

    def commands(self) -> list[list[str]]:
        return [[sys.executable, str(Path(__file__).resolve()), "--worker", self.client.prefix, "-c", str(self.concurrency)]]


def serve_worker(prefix: str, concurrency: int) -> int:
    """The drain's redflow worker: ``-c`` slots, 10-minute leases, until SIGTERM."""
    from redflow.engine.worker import start_worker

    worker = start_worker(
        bench_app.registry, url=os.environ["REDIS_URL"], prefix=prefix, concurrency=concurrency, lease_ms=LEASE_MS, cancel_poll_ms=LEASE_MS
    )
    gevent.signal_handler(signal.SIGTERM, worker.stop)
    worker.join()
    return 0


def drain_count(meter: Callgrind, system: peers.System, name: str, n: int) -> Count:
    probe = Probe(meter.url)
    env = {**os.environ, "REDIS_URL": meter.url, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    try:
        result = peers.drain(system, probe, env, n, WARM, timeout_s=1800.0, meter=meter)
    finally:
        probe.close()
    return Count(name, "drain", meter.counted, result.jobs, result.redis_commands)


def redflow_steps(meter: Meter, n: int) -> Count:
    """**step**: a first-time step's record (``save_step``) of 500 started runs, in pipelines
    of 500, as a worker sends it while its lease is fresh (no Dramatiq counterpart)."""
    registry = Registry()
    define_workflow("noop", registry=registry)(lambda ctx: None)
    client = create_client(url=meter.url, prefix="bench", registry=registry)
    record = '{"status":"succeeded","seq":1,"startedAt":1,"finishedAt":2,"outputJson":"1","attempt":1}'
    try:
        client.run_many("noop", [None] * IN_FLIGHT)
        now, batch = client.now_ms(), Batch(client.redis)
        tokens = [uuid.uuid4().hex for _ in range(IN_FLIGHT)]
        for token in tokens:
            client.scripts.take_run(queue="default", token=token, lease_ms=LEASE_MS, now_ms=now, conn=batch)
        runs = [(claim.run_id, token) for claim, token in zip(batch.execute(), tokens)]
        rounds = max(1, n // IN_FLIGHT)
        for index in range(-1, rounds):  # one round to warm up
            if index == 0:
                meter.begin()
            for run_id, token in runs:
                client.scripts.save_step(run_id=run_id, queue="default", token=token, name=f"s{index}", step_json=record,
                                         lease_ms=LEASE_MS, check_lease=False, conn=batch)  # fmt: skip
            assert all(saved.state == "saved" for saved in batch.execute())
        meter.end()
        return Count("redflow-gevent", "step", meter.counted, rounds * len(runs))
    finally:
        client.close()


# -- the command ------------------------------------------------------------------------------


def render(counts: Sequence[Count]) -> str:
    lines = ["| way | redflow-gevent instructions/job | Dramatiq instructions/job | redflow ÷ Dramatiq |", "|---|---|---|---|"]
    for way in ("loop", "drain", "step"):
        ours = next((c for c in counts if c.way == way and c.system == "redflow-gevent"), None)
        theirs = next((c for c in counts if c.way == way and c.system == "Dramatiq"), None)
        if ours is None and theirs is None:
            continue
        cells = [f"{c.per_job:,.0f} ({c.jobs:,} jobs" + (f", {c.commands / c.jobs:.1f} commands/job)" if c.commands else ")") if c else "-"
                 for c in (ours, theirs)]  # fmt: skip
        ratio = f"**{ours.per_job / theirs.per_job:.2f}×**" if ours and theirs else "-"
        lines.append(f"| {way} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def measure(args: argparse.Namespace) -> list[Count]:
    meter = Callgrind(args.redis_server, args.keep)
    os.environ["REDIS_URL"] = meter.url  # read by peer_dramatiq at import
    plans: list[tuple[str, Callable[[], Count]]] = [
        ("loop", lambda: redflow_loop(meter, args.n)),
        ("loop", lambda: dramatiq_loop(meter, args.n)),
        ("drain", lambda: drain_count(meter, SlowRedisRedflow(meter.url, 500, 1), "redflow-gevent", args.n)),
        ("drain", lambda: drain_count(meter, peers.Dramatiq(2, 50), "Dramatiq", args.n)),
        ("step", lambda: redflow_steps(meter, args.n)),
    ]
    counts = []
    try:
        for way, plan in plans:
            if args.only in (None, way):
                meter.redis.flushall()
                counts.append(plan())
                print(f"{counts[-1].system} {way}: {counts[-1].per_job:,.0f} instructions/job", file=sys.stderr, flush=True)
    finally:
        meter.close()
    if args.keep:
        print("callgrind output: " + ", ".join(meter.dumps))
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("-n", type=int, default=2000, help="jobs counted per measurement (default 2000)")
    parser.add_argument("--only", choices=("loop", "drain", "step"), help="one way only (default: all)")
    parser.add_argument("--redis-server", default=None, help="the redis-server binary (default: the one tests use)")
    parser.add_argument("--keep", action="store_true", help="keep the callgrind output files")
    parser.add_argument("--cpu", action="store_true", help="instead: the loops on a native redis-server, CPU seconds user and system")
    parser.add_argument("--reps", type=int, default=4, help="with --cpu: interleaved reps (default 4)")
    parser.add_argument("--worker", metavar="PREFIX", help=argparse.SUPPRESS)
    parser.add_argument("-c", type=int, default=500, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return serve_worker(args.worker, args.c)
    if args.cpu:
        print(f"Redis CPU per job, the loops on a native redis-server, {args.n:,} jobs a loop:\n")
        print(cpu_loops(args.n, args.reps))
        return 0
    counts = measure(args)
    print(f"Redis instructions per job under callgrind, {args.n:,} jobs a measurement (enqueues not counted):\n")
    print(render(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
