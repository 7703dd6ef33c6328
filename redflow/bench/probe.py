"""What ``redflow-gevent bench`` measures with.

- :class:`Probe`: the bench's own Redis connection, which counts every
  command and round trip it sends, so that they can be taken out of the
  server's counters and what is left is the worker's.
- :class:`ServerSample`: one ``INFO commandstats stats cpu clients`` reply.
  ``commandstats`` also counts the commands Lua scripts call, so the number
  of requests clients sent (round trips; a pipeline is one) is taken from
  ``total_reads_processed`` instead, which Redis bumps once per read of a
  client's socket.
- :meth:`Probe.kept_bytes`: what Redis keeps for data, client buffers left out.
- :class:`ProcessSample`: CPU seconds and memory of a process from /proc.
- :class:`AttemptRecorder`: a worker observer keeping the hot-path
  timestamps of every attempt.
- :func:`percentiles` of latencies.
"""

from __future__ import annotations

import os
import resource
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import gevent
import redis
from gevent.event import Event

from redflow.engine.observers import AttemptReport

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(RuntimeError):
    """The bench could not measure: the command says why and exits non-zero."""


def percentiles(values_s: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / p99 (linear interpolation between ranks) and max, in ms."""
    if not values_s:
        return {}
    ordered = sorted(values_s)

    def at(fraction: float) -> float:
        pos = fraction * (len(ordered) - 1)
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return (ordered[low] + (ordered[high] - ordered[low]) * (pos - low)) * 1000.0

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": ordered[-1] * 1000.0}


# -- Redis -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerSample:
    commands: Counter[str]  # calls per command, including those scripts make
    reads: int  # client requests read (round trips)
    cpu_s: float  # Redis user + system CPU seconds
    blocked_clients: int
    own_commands: Counter[str]  # what the probe had sent when the sample was taken
    own_trips: int


@dataclass(frozen=True, slots=True)
class ServerDelta:
    """Server counters between two samples, the probe's own requests taken out."""

    commands: Counter[str]
    trips: int
    cpu_s: float
    own_commands: Counter[str]


class Probe:
    """The bench's own connection to Redis; counts what it sends.

    A sample's INFO is counted on both ends consistently: the server counts
    the earlier INFO's command and the later INFO's read in a delta, and the
    probe's own counters between two samples include exactly one INFO.
    """

    def __init__(self, url: str) -> None:
        self.redis = redis.Redis.from_url(url, decode_responses=True, single_connection_client=True, client_name="redflow-bench")
        self.commands: Counter[str] = Counter()
        self.trips = 0
        self.redis.ping()  # connect now: the handshake is not part of any window

    def call(self, *args: Any) -> Any:
        self.commands[str(args[0]).lower()] += 1
        self.trips += 1
        return self.redis.execute_command(*args)  # type: ignore[no-untyped-call]

    def pipeline(self, commands: Iterable[tuple[Any, ...]]) -> list[Any]:
        """Several commands in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for args in commands:
            self.commands[str(args[0]).lower()] += 1
            pipe.execute_command(*args)  # type: ignore[no-untyped-call]
        self.trips += 1
        return pipe.execute()

    def sample(self) -> ServerSample:
        info = self.call("INFO", "commandstats", "stats", "cpu", "clients")
        calls = Counter({name[len("cmdstat_") :]: stat["calls"] for name, stat in info.items() if name.startswith("cmdstat_")})
        return ServerSample(
            commands=calls,
            reads=int(info["total_reads_processed"]),
            cpu_s=float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
            blocked_clients=int(info["blocked_clients"]),
            own_commands=Counter(self.commands),
            own_trips=self.trips,
        )

    def kept_bytes(self, settle_s: float = 0.0) -> int:
        """Bytes Redis holds for data: ``used_memory`` less its clients' buffers.

        Client memory (about 10-40 KB a connection, 500 slots: megabytes) is
        taken out, so that a figure taken before the worker connected and one
        taken after can be compared. Redis tracks it in its clients cron, which
        visits every client about once a second: ``settle_s`` waits first.
        """
        if settle_s > 0:
            gevent.sleep(settle_s)
        info = self.call("INFO", "memory")
        return int(info["used_memory"]) - int(info.get("mem_clients_normal", 0))

    def server_version(self) -> str:
        return str(self.call("INFO", "server")["redis_version"])

    def close(self) -> None:
        self.redis.close()


def server_delta(before: ServerSample, after: ServerSample) -> ServerDelta:
    own = after.own_commands - before.own_commands
    commands = after.commands - before.commands
    commands.subtract(own)
    return ServerDelta(
        commands=+commands,  # unary plus drops the zero and negative counts
        trips=max(0, after.reads - before.reads - (after.own_trips - before.own_trips)),
        cpu_s=after.cpu_s - before.cpu_s,
        own_commands=own,
    )


# -- processes -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessSample:
    cpu_s: float  # user + system
    rss_mb: float
    peak_rss_mb: float


def process_sample(pid: int) -> ProcessSample:
    """CPU and memory of ``pid`` from /proc (no psutil); this process without /proc."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status_file:
            status = dict(line.split(":", 1) for line in status_file if ":" in line)
        cpu_s = _cpu_s(pid)
    except FileNotFoundError:
        if pid != os.getpid():
            raise
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return ProcessSample(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, usage.ru_maxrss / 1024.0)
    return ProcessSample(cpu_s=cpu_s, rss_mb=_kb(status["VmRSS"]) / 1024.0, peak_rss_mb=_kb(status["VmHWM"]) / 1024.0)


def _cpu_s(pid: int) -> float:
    """Nanosecond run time of the process's threads (schedstat), which a
    small run needs: ``utime + stime`` of /proc/<pid>/stat count 10 ms ticks."""
    try:
        total_ns = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as schedstat:
                total_ns += int(schedstat.read().split()[0])
        return total_ns / 1e9
    except (FileNotFoundError, ProcessLookupError):  # no schedstats in this kernel, or a thread just ended
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat_file:
            # fields after the ")" closing the command name: state is [0], utime [11], stime [12]
            fields = stat_file.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _kb(value: str) -> int:
    return int(value.split()[0])


# -- the worker's own timestamps ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timing:
    """One run's hot-path times, ``time.time()`` seconds."""

    claimed_at: float
    started_at: float
    finished_at: float
    outcome: str


class AttemptRecorder:
    """Worker observer: keeps each attempt's timestamps, and lets the bench
    wait for a number of attempts without asking Redis."""

    def __init__(self) -> None:
        self.timings: dict[str, Timing] = {}
        self._target = 0
        self._reached = Event()

    def on_attempt(self, report: AttemptReport) -> None:
        self.timings[report.run_id] = Timing(report.claimed_at, report.started_at, report.finished_at, report.outcome)
        if len(self.timings) >= self._target:
            self._reached.set()

    def __len__(self) -> int:
        return len(self.timings)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Block until ``count`` attempts in all have been recorded."""
        self._target = count
        if len(self.timings) >= count:
            return True
        self._reached.clear()
        return self._reached.wait(timeout) or len(self.timings) >= count
