"""``redflow-gevent worker --processes N``: N worker processes under one supervisor.

One gevent worker process uses one core; a machine with more cores runs
several. The supervisor is plain process management, as gunicorn's arbiter
or Celery's prefork parent: it starts N copies of the same ``worker``
command (with ``--processes 1``), restarts one that dies (after a backoff
that doubles from 1 s up to a minute, back to 1 s once a child has lived a
minute), forwards SIGTERM and SIGINT so that every child drains
gracefully (a second signal stops them at once, as it does a lone worker),
and exits when all children have: 0 when every child exited 0.

It never talks to Redis. A child that dies is like any dead worker: its
runs' leases lapse and the reaper of a live worker hands them on. A child
that fails with an error within ``STARTUP_S`` of its first start (a bad
``-A``, a wrong password: exit status 2) is not restarted: the supervisor
stops the others and exits with that status, as a lone worker would.

Children run in a session of their own, so a terminal's Ctrl-C reaches the
supervisor alone (which forwards it once), and on Linux they get SIGTERM,
a graceful drain, if the supervisor itself dies.

Metrics: one endpoint per child. ``--metrics-port [HOST:]P`` gives child i
(1..N) the port P + i - 1, each serving that child's own registry;
Prometheus scrapes them all and sums across them (``sum without
(instance)``). Port 0 gives every child a free port of its own.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess
from gevent.event import Event

from redflow.core.errors import RedflowError
from redflow.ops.cli.stop_signals import on_stop_signals
from redflow.ops.cli.values import usage_error

log = logging.getLogger("redflow.supervisor")

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
#: A child that lived this long before it died is restarted after ``FIRST_BACKOFF_S`` again.
STABLE_S = 60.0
#: A child exiting with an error this soon after its first start met a start-up
#: error (a bad ``-A``, a wrong password): restarting it cannot help.
STARTUP_S = 10.0
#: After a second signal, how long children get to exit before SIGKILL.
KILL_AFTER_S = 10.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def cli_command() -> list[str]:
    """How to run the ``redflow-gevent`` command with this interpreter."""
    script = Path(sys.executable).with_name("redflow-gevent")
    return [str(script)] if script.exists() else [sys.executable, "-m", "redflow.ops.cli"]


def child_commands(argv: Sequence[str], processes: int, metrics_port: str | None) -> list[list[str]]:
    """Each child's command: the supervisor's own arguments, then ``--processes 1``
    and its own metrics port (argparse keeps the last value of an option)."""
    base = [*cli_command(), *argv, "--processes", "1"]
    if metrics_port is None:
        return [list(base) for _ in range(processes)]
    try:  # an optional dependency (prometheus_client): imported only when asked for
        from redflow.ops.observe.metrics import parse_listen
    except ImportError as exc:
        usage_error(f"--metrics-port: {exc}")
    try:
        host, port = parse_listen(metrics_port)
    except RedflowError as exc:  # a bad address
        usage_error(f"--metrics-port: {exc}")
    if port and port + processes - 1 > 65535:
        usage_error(f"--metrics-port: {processes} processes need ports {port}..{port + processes - 1}, past 65535")
    shown_host = f"[{host}]" if ":" in host else host
    return [[*base, "--metrics-port", f"{shown_host}:{port + index if port else 0}"] for index in range(processes)]


def supervise(args: argparse.Namespace) -> int:
    """``worker --processes N`` with N > 1 (the CLI runs one worker in-process for 1)."""
    return Supervisor(child_commands(args.argv, args.processes, args.metrics_port)).run()


@dataclass
class _Child:
    index: int  # 1..N
    command: list[str]
    proc: Any = None  # gevent.subprocess.Popen
    started_at: float = 0.0  # monotonic s
    starts: int = 0
    exit_code: int | None = None

    @property
    def pid(self) -> int:
        return int(self.proc.pid) if self.proc is not None else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Supervisor:
    """Keeps one process per command running until told to stop; see the module's docstring."""

    def __init__(
        self,
        commands: Sequence[list[str]],
        *,
        first_backoff_s: float = FIRST_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        stable_s: float = STABLE_S,
        startup_s: float = STARTUP_S,
        kill_after_s: float = KILL_AFTER_S,
    ) -> None:
        self.children = [_Child(index, list(command)) for index, command in enumerate(commands, 1)]
        self.first_backoff_s, self.max_backoff_s = first_backoff_s, max_backoff_s
        self.stable_s, self.startup_s, self.kill_after_s = stable_s, startup_s, kill_after_s
        self.signals = 0
        self.gave_up: int | None = None  # the exit status of a child that failed at start-up
        self._stopping = Event()

    def run(self) -> int:
        """Start the children and block until all have exited; the exit code."""
        restore_signals = on_stop_signals(self.on_signal)
        log.info("supervisor (pid %d): %d worker processes", os.getpid(), len(self.children))
        keepers = [gevent.spawn(self._keep, child) for child in self.children]
        try:
            gevent.joinall(keepers, raise_error=True)
        finally:
            restore_signals()
        if self.gave_up is not None:
            return self.gave_up
        if self.signals > 1:
            return 1
        return 0 if all(child.exit_code == 0 for child in self.children) else 1

    def on_signal(self, signum: int) -> None:
        self.signals += 1
        if self.signals == 1:
            log.info("signal %d: the worker processes stop gracefully; send it again to stop them at once", signum)
            self.stop(signum)
            return
        log.warning("second signal: the worker processes stop at once; leases expire and other workers take the runs over")
        self._forward(signum)
        gevent.spawn_later(self.kill_after_s, self._forward, signal.SIGKILL)

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """No more restarts; ``signum`` to every child (SIGTERM / SIGINT: a graceful drain)."""
        self._stopping.set()
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        for child in self.children:
            if child.alive():
                child.proc.send_signal(signum)

    def _keep(self, child: _Child) -> None:
        """Run ``child`` until the supervisor stops, restarting it when it dies."""
        backoff_s = self.first_backoff_s
        while not self._stopping.is_set():
            self._start(child)
            code = child.exit_code = child.proc.wait()
            lived_s = time.monotonic() - child.started_at
            if self._stopping.is_set():
                log.info("worker process %d (pid %d) %s", child.index, child.pid, _exit_text(code))
                if code in (-signal.SIGTERM, -signal.SIGINT):
                    # Stopped while starting, before its handlers were set: a worker sets
                    # them before it can claim a run, so it had none. A clean stop.
                    child.exit_code = 0
                return
            if code > 0 and child.starts == 1 and lived_s < self.startup_s:
                log.error("worker process %d (pid %d) %s %.1f s after it started: a start-up error (see its output); "
                          "not restarting it, stopping the others", child.index, child.pid, _exit_text(code), lived_s)  # fmt: skip
                self.gave_up = code
                self.stop()
                return
            if lived_s >= self.stable_s:
                backoff_s = self.first_backoff_s
            log.warning("worker process %d (pid %d) %s after %.1f s; restarting it in %.1f s",
                        child.index, child.pid, _exit_text(code), lived_s, backoff_s)  # fmt: skip
            if self._stopping.wait(backoff_s):
                return
            backoff_s = min(backoff_s * 2, self.max_backoff_s)

    def _start(self, child: _Child) -> None:
        child.proc = subprocess.Popen(child.command, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_child_setup(os.getpid()))
        child.started_at = time.monotonic()
        child.starts += 1
        child.exit_code = None
        log.info("worker process %d started (pid %d)", child.index, child.pid)
        if self._stopping.is_set():  # a signal came while it was being started
            child.proc.send_signal(signal.SIGTERM)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _child_setup(supervisor_pid: int) -> Callable[[], None]:
    """Run in the child before exec: no blocked signals (the event loop may
    block some), and on Linux a SIGTERM if the supervisor dies, even by SIGKILL."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None

    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != supervisor_pid:  # it died before prctl: no signal would come
                os.kill(os.getpid(), signal.SIGTERM)

    return setup
