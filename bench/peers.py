"""Side by side: the same no-op jobs drained by redflow-gevent, Dramatiq and Huey.

    pip install -e '.[peers]'
    python bench/peers.py                        # 20,000 jobs a drain, 4 interleaved reps
    python bench/peers.py -n 5000 --reps 2 --systems redflow,dramatiq

One private redis-server (``redflow.testing.RedisServer``) serves every
system in turn, flushed between drains. Reps are interleaved: each rep runs
every system, in an order rotated from rep to rep, so that a change in the
machine's load falls on all of them. A drain: the jobs are enqueued and
parked (their queue list RENAMEd away) before the workers start; the
workers warm up on ``--warm`` jobs; one RENAME hands the jobs over and the
clock runs until the last is done (redflow: the succeeded index counts
them all; Dramatiq: its message hash is empty, each ack deletes one;
Huey, which keeps no record of a finished no-op: its list is empty).

Per job: worker CPU (every worker process and its children, from /proc),
Redis CPU (``INFO cpu``), Redis commands (``INFO commandstats``, the bench's
own taken out), and the bytes Redis still holds after the drain (``INFO
memory``, client buffers left out). The table gives medians with the range
over the reps, then redflow-gevent's ratio to each peer. Not part of the
test suite: it takes minutes and its figures depend on the machine.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Protocol  # noqa: E402

import gevent  # noqa: E402

from redflow.bench import app as bench_app  # noqa: E402
from redflow.bench.phases import KEPT_SETTLE_S  # noqa: E402
from redflow.bench.probe import BenchError, Probe, process_sample, server_delta  # noqa: E402
from redflow.bench.report import load_text, machine  # noqa: E402
from redflow.core import codec  # noqa: E402

HERE = Path(__file__).resolve().parent
POLL_S = 0.01
STAGING_SUFFIX = ":peers-staging"


# -- the systems ------------------------------------------------------------------


class System(Protocol):
    name: str  # the table's row label
    queue_key: str  # the Redis list a drain parks and hands over

    def enqueue(self, count: int) -> None: ...
    def pending(self, probe: Probe) -> int: ...  # jobs not done yet, parked ones included
    def commands(self) -> list[list[str]]: ...  # one per worker process to start


def _venv_bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


class Redflow:
    def __init__(self, url: str, concurrency: int, processes: int) -> None:
        from redflow.client import RedflowClient
        from redflow.store.connection import create_redis

        self.concurrency, self.processes = concurrency, processes
        self.client = RedflowClient(create_redis(url), prefix="peers", registry=bench_app.registry, owns_redis=True)
        self.name = f"redflow-gevent `-c {concurrency}`, " + (f"{processes} processes" if processes > 1 else "1 process")
        self.queue_key = self.client.keys.queue_ready(bench_app.QUEUE)
        self._enqueued = 0

    def enqueue(self, count: int) -> None:
        self.client.run_many(bench_app.NOOP, [None] * count)
        self._enqueued += count

    def pending(self, probe: Probe) -> int:
        return self._enqueued - int(probe.call("ZCARD", self.client.keys.runs_status("succeeded")))

    def commands(self) -> list[list[str]]:
        from redflow.ops.cli.supervisor import cli_command

        worker = ["worker", "-A", "redflow.bench.app:registry", "-c", str(self.concurrency), "--prefix", self.client.prefix]
        return [[*cli_command(), "--log-level", "warning", *worker, "--processes", str(self.processes)]]


class Dramatiq:
    def __init__(self, processes: int, threads: int) -> None:
        import peer_dramatiq

        self.module, self.processes, self.threads = peer_dramatiq, processes, threads
        self.name = f"Dramatiq gevent, {processes} processes × {threads}"
        self.queue_key = peer_dramatiq.QUEUE_KEY

    def enqueue(self, count: int) -> None:
        for _ in range(count):
            self.module.noop.send()

    def pending(self, probe: Probe) -> int:
        return int(probe.call("HLEN", self.module.MESSAGES_KEY))

    def commands(self) -> list[list[str]]:
        return [[_venv_bin("dramatiq-gevent"), "peer_dramatiq", "--processes", str(self.processes), "--threads", str(self.threads)]]


class Huey:
    def __init__(self, processes: int, greenlets: int) -> None:
        import peer_huey

        self.module, self.processes, self.greenlets = peer_huey, processes, greenlets
        self.name = f"Huey greenlet, {processes} processes × {greenlets}"
        self.queue_key = peer_huey.huey.storage.queue_key

    def enqueue(self, count: int) -> None:
        for _ in range(count):
            self.module.noop()

    def pending(self, probe: Probe) -> int:
        return sum(probe.pipeline([("LLEN", self.queue_key), ("LLEN", self.queue_key + STAGING_SUFFIX)]))

    def commands(self) -> list[list[str]]:
        command = [sys.executable, str(HERE / "peer_huey.py"), "-k", "greenlet", "-w", str(self.greenlets), "-q"]
        return [list(command) for _ in range(self.processes)]


# -- one drain ----------------------------------------------------------------------


class Meter(Protocol):
    """Something else to count over exactly the drain's window (bench/redis_instructions.py's callgrind)."""

    def begin(self) -> None: ...
    def end(self) -> None: ...


class NoMeter:
    def begin(self) -> None:
        """Nothing more to count."""

    def end(self) -> None:
        """Nothing more to count."""


@dataclass(frozen=True)
class Drain:
    """One drain of one system: totals, per job in :func:`per_job`."""

    system: str
    jobs: int
    seconds: float
    worker_cpu_s: float
    redis_cpu_s: float
    redis_commands: int
    kept_bytes: float  # Redis memory growth over the drain's jobs (warm-up included)
    kept_jobs: int


class Workers:
    """The worker processes of one drain; their output goes to a file."""

    def __init__(self, commands: list[list[str]], env: dict[str, str]) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="redflow-peers-", suffix=".log", delete=False)
        self.procs = [subprocess.Popen(c, env=env, cwd=HERE, stdout=self.log, stderr=subprocess.STDOUT) for c in commands]

    def check(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise BenchError(f"{proc.args[0]} exited with {proc.returncode}:\n{Path(self.log.name).read_text()[-2000:]}")

    def pids(self) -> list[int]:
        """The processes started and all their descendants (Dramatiq forks its workers)."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                        parents[int(entry)] = int(stat.read().rpartition(")")[2].split()[1])
                except (FileNotFoundError, ProcessLookupError):
                    continue  # it ended while the list was read
        found = [proc.pid for proc in self.procs]
        for pid in found:  # grows while it is walked: breadth first
            found.extend(child for child, parent in parents.items() if parent == pid)
        return found

    def cpu_s(self, pids: Sequence[int]) -> float:
        return sum(process_sample(pid).cpu_s for pid in pids)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()
        os.unlink(self.log.name)


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str, check: Callable[[], None]) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        check()
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not done within {timeout_s:.0f}s")
        gevent.sleep(POLL_S)


def drain(system: System, probe: Probe, env: dict[str, str], jobs: int, warm: int, timeout_s: float, meter: Meter | None = None) -> Drain:
    """Park ``jobs``, start the workers, warm them up, hand the jobs over and time the drain
    (``meter`` begins right before the handover and ends as the last job is done)."""
    meter = meter or NoMeter()
    probe.call("FLUSHALL")
    kept_before = probe.kept_bytes()
    system.enqueue(jobs)
    staging = system.queue_key + STAGING_SUFFIX
    probe.call("RENAME", system.queue_key, staging)
    workers = Workers(system.commands(), env)
    try:
        system.enqueue(warm)
        wait_for(lambda: system.pending(probe) <= jobs, timeout_s, f"{system.name} warm-up", workers.check)
        gevent.sleep(1.0)  # every slot back in its wait for work
        pids = workers.pids()
        cpu_before, before = workers.cpu_s(pids), probe.sample()
        meter.begin()
        began = time.monotonic()
        probe.call("RENAME", staging, system.queue_key)
        wait_for(lambda: system.pending(probe) == 0, timeout_s, f"{system.name} drain", workers.check)
        seconds = time.monotonic() - began
        meter.end()
        after, cpu_after = probe.sample(), workers.cpu_s(pids)
        kept = probe.kept_bytes(settle_s=KEPT_SETTLE_S) - kept_before
    finally:
        workers.stop()
    delta = server_delta(before, after)
    return Drain(system.name, jobs, seconds, cpu_after - cpu_before, delta.cpu_s, sum(delta.commands.values()), kept, jobs + warm)


# -- the table ------------------------------------------------------------------------

#: column -> (the figure per job of a drain, its format, whether more is better)
COLUMNS: dict[str, tuple[Callable[[Drain], float], str, bool]] = {
    "jobs/s": (lambda d: d.jobs / d.seconds, "{:,.0f}", True),
    "worker CPU µs/job": (lambda d: d.worker_cpu_s * 1e6 / d.jobs, "{:,.0f}", False),
    "Redis CPU µs/job": (lambda d: d.redis_cpu_s * 1e6 / d.jobs, "{:,.0f}", False),
    "Redis commands/job": (lambda d: d.redis_commands / d.jobs, "{:.1f}", False),
    "Redis bytes kept/job": (lambda d: d.kept_bytes / d.kept_jobs, "{:,.0f}", False),
}


def per_job(drains: Sequence[Drain]) -> dict[str, dict[str, list[float]]]:
    """system -> column -> the figure of each of its drains, in the order systems first ran."""
    table: dict[str, dict[str, list[float]]] = {}
    for d in drains:
        row = table.setdefault(d.system, {column: [] for column in COLUMNS})
        for column, (value, _, _) in COLUMNS.items():
            row[column].append(value(d))
    return table


def _cell(values: list[float], fmt: str) -> str:
    median = fmt.format(statistics.median(values))
    return median if len(values) < 2 else f"{median} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def render(drains: Sequence[Drain], reference: str | None = None) -> str:
    """The markdown table (medians, ranges over the reps), then ``reference``'s
    ratio to each other system (default: the first system)."""
    table = per_job(drains)
    if not table:
        return "(no drain)"
    reference = reference or next(iter(table))
    lines = ["| system | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for system, row in table.items():
        lines.append(f"| {system} | " + " | ".join(_cell(row[c], fmt) for c, (_, fmt, _) in COLUMNS.items()) + " |")
    peers = [system for system in table if system != reference]
    if peers:
        lines += ["", f"{reference}'s figure ÷ the peer's (medians; jobs/s: above 1 is faster, the costs: below 1 is cheaper):", ""]
        lines += ["| ÷ | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
        ours = {column: statistics.median(values) for column, values in table[reference].items()}
        for peer in peers:
            theirs = {column: statistics.median(values) for column, values in table[peer].items()}
            ratios = [f"{ours[c] / theirs[c]:.2f}×" if theirs[c] else "-" for c in COLUMNS]
            lines.append(f"| {peer} | " + " | ".join(ratios) + " |")
        lines += ["", f"{PAIRED}, {reference}'s ÷ the peer's in the same rep (a change of load falls on both):", ""]
        for peer in peers:
            paired = paired_ratios(table, reference, peer, PAIRED)
            if paired:
                each = ", ".join(f"{ratio:.2f}×" for ratio in paired)
                lines.append(f"- {peer}: median **{statistics.median(paired):.2f}×** ({each})")
    return "\n".join(lines)


#: The column whose ratio is also given rep by rep: Redis's used_cpu per job, the figure
#: a fleet on one Redis pays (issue 34: at or below Dramatiq's).
PAIRED = "Redis CPU µs/job"


def paired_ratios(table: dict[str, dict[str, list[float]]], ours: str, peer: str, column: str) -> list[float]:
    """``ours`` ÷ ``peer`` in ``column``, rep by rep (the n-th drain of each ran in the n-th rep)."""
    return [mine / theirs for mine, theirs in zip(table[ours][column], table[peer][column]) if theirs]


# -- the command ----------------------------------------------------------------------


def _pair(text: str) -> tuple[int, int]:
    """``"2x50"`` -> ``(2, 50)``: processes × threads or greenlets."""
    left, sep, right = text.lower().partition("x")
    try:
        pair = int(left), int(right)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PROCESSESxWORKERS such as 2x50, got {text!r}") from None
    if not sep or min(pair) < 1:
        raise argparse.ArgumentTypeError(f"expected PROCESSESxWORKERS such as 2x50, got {text!r}")
    return pair


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("-n", "--jobs", type=int, default=20000, help="jobs per drain (default 20000)")
    p.add_argument("--reps", type=int, default=4, help="interleaved reps (default 4)")
    p.add_argument("--warm", type=int, default=1000, help="warm-up jobs before each drain (default 1000)")
    p.add_argument("--systems", default="redflow,dramatiq,huey", help="comma-separated, of redflow, dramatiq, huey")
    p.add_argument("--redflow", type=_pair, default=(1, 500), metavar="PxC", help="processes x slots (default 1x500)")
    p.add_argument("--dramatiq", type=_pair, default=(2, 50), metavar="PxT", help="processes x threads (default 2x50)")
    p.add_argument("--huey", type=_pair, default=(2, 250), metavar="PxG", help="processes x greenlets (default 2x250)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds a warm-up or a drain may take (default 180)")
    p.add_argument("--json", metavar="PATH", help="save every drain and the machine as JSON")
    args = p.parse_args(argv)
    args.systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = set(args.systems) - {"redflow", "dramatiq", "huey"}
    if unknown or not args.systems:
        p.error(f"--systems: unknown {sorted(unknown)}; choose from redflow, dramatiq, huey")
    if min(args.jobs, args.reps) < 1 or args.warm < 0:
        p.error("-n and --reps must be >= 1, --warm >= 0")
    return args


def make_system(name: str, args: argparse.Namespace, url: str) -> System:
    if name == "redflow":
        processes, concurrency = args.redflow
        return Redflow(url, concurrency, processes)
    if name == "dramatiq":
        return Dramatiq(*args.dramatiq)
    return Huey(*args.huey)


def main(argv: Sequence[str] | None = None) -> int:
    from redflow.testing import RedisServer

    args = parse_args(argv)
    for name in set(args.systems) - {"redflow"}:
        if importlib.util.find_spec(name) is None:
            raise SystemExit(f"bench/peers.py: {name} is not installed: pip install -e '.[peers]' (or leave it out of --systems)")
    meta: dict[str, Any] = {**machine(), "command": " ".join(["python bench/peers.py", *(argv or sys.argv[1:])])}
    drains: list[Drain] = []
    with RedisServer() as server:
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "REDIS_URL": server.url, "PYTHONPATH": path}
        os.environ["REDIS_URL"] = server.url  # read by the peers' modules, imported for their producers
        sys.path.insert(0, str(HERE))
        probe = Probe(server.url)
        meta["redis_version"] = probe.server_version()
        for rep in range(args.reps):
            order = args.systems[rep % len(args.systems) :] + args.systems[: rep % len(args.systems)]
            for name in order:
                result = drain(make_system(name, args, server.url), probe, env, args.jobs, args.warm, args.timeout)
                drains.append(result)
                print(f"rep {rep + 1}/{args.reps} {result.system}: {result.jobs / result.seconds:,.0f} jobs/s", file=sys.stderr, flush=True)
        probe.close()
    meta["load_average_after"] = machine()["load_average"]
    print(f"{meta['date']}: {meta['cpus']} CPU(s) {meta['cpu']}, Redis {meta['redis_version']}, load average "
          f"{load_text(meta['load_average'])} before, {load_text(meta['load_average_after'])} after")  # fmt: skip
    print(f"{meta['command']}: {args.jobs:,} no-op jobs a drain, {args.reps} interleaved reps; medians (ranges)\n")
    print(render(drains, reference=next((d.system for d in drains if d.system.startswith("redflow")), None)))
    if args.json:
        Path(args.json).write_text(codec.dumps({"meta": meta, "drains": [asdict(d) for d in drains]}) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
