"""Helpers for test suites: a private ``redis-server`` and workflows run inline.

:class:`RedisServer` starts a real redis-server on a free loopback port with
its own temporary directory, so a test can stop, kill and restart it. No
mock of Redis anywhere: what the tests prove holds for the real thing.

:func:`run_inline` runs a workflow, its steps and its child workflows in the
calling greenlet, with no worker and no Redis, for fast unit tests of a
handler's logic. Steps go through the engine's own ``StepApi``, so their
rules are the worker's: unique names, JSON outputs, timeouts, and replay of
succeeded steps when a retryable error makes the run try again.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from redflow.testing.inline import InlineRunner, run_inline
from redflow.testing.inline_runs import InlineEvent, InlineRun

__all__ = ["InlineEvent", "InlineRun", "InlineRunner", "RedisServer", "RedisServerError", "free_port", "redis_server_binary", "run_inline"]

_STARTUP_TIMEOUT_S = 10.0


class RedisServerError(RuntimeError):
    """redis-server could not be found or started."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RedisServerError(
            "redis-server is not installed: run scripts/test (it installs Debian's redis-server package) or `apt-get install redis-server`"
        )
    return path


class RedisServer:
    """One private redis-server on 127.0.0.1; ``persistent=True`` turns on AOF in its dir."""

    def __init__(self, *, port: int | None = None, persistent: bool = False, extra_args: Sequence[str] = ()) -> None:
        self.port = port or free_port()
        self.persistent = persistent
        self.extra_args = list(extra_args)
        self.dir = Path(tempfile.mkdtemp(prefix="redflow-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        durability = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        return [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            *durability,
            "--dir", str(self.dir),
            "--logfile", str(self.dir / "redis.log"),
            "--daemonize", "no",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> RedisServer:
        if self.process is not None and self.process.poll() is None:
            return self
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                log = self.log_tail()
                raise RedisServerError(f"redis-server exited with {self.process.returncode}: {err}{log}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.kill()
        raise RedisServerError(f"redis-server did not answer on port {self.port} within {_STARTUP_TIMEOUT_S}s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH", b"-LOADING"))
        except OSError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        log = self.dir / "redis.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""

    def stop(self, *, timeout: float = 10.0) -> None:
        """SIGTERM and wait (redis writes its AOF when persistent)."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed beyond what fsync already wrote."""
        self._signal(signal.SIGKILL, 10.0)

    def restart(self) -> RedisServer:
        self.stop()
        return self.start()

    def _signal(self, sig: int, timeout: float) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
