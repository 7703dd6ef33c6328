"""``redflow-gevent worker``: load the ``-A`` workflows, then run a worker in
this process until SIGTERM or SIGINT (a second one stops it at once), or N
of them under a supervisor (``--processes N``, :mod:`redflow.ops.cli.supervisor`).

A start-up error a user can act on (no such module, no workflows, a Redis
that refuses us) is one log line and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import gevent
from gevent.event import Event
from redis.exceptions import RedisClusterException, RedisError

from redflow.core.errors import RedflowError
from redflow.core.interop import COMPAT_MODES
from redflow.ops.cli.stop_signals import on_stop_signals
from redflow.ops.cli.supervisor import supervise
from redflow.ops.cli.values import EXIT_USAGE, non_negative_float, non_negative_int, positive_int
from redflow.registry import Registry, get_default_registry
from redflow.store.connection import redacted_url, resolve_url

if TYPE_CHECKING:
    from redflow.engine.worker import Worker

log = logging.getLogger("redflow.cli")


def load_registry(app: str | None) -> Registry:
    """Import ``module`` (its workflows register in the default registry) or
    ``module:attr`` (a Registry in that module). A module that is not there,
    or a file name given for a module, is a :func:`startup_error`; an error
    raised by the module's own code keeps its traceback (it is theirs to fix)."""
    if not app:
        return get_default_registry()
    module_name, _, attr = app.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise  # the module exists and imports something missing: its traceback says where
        startup_error(f"-A {app}: no module named {exc.name!r} (searched the current directory and sys.path){_file_hint(app)}")
    except ValueError as exc:  # "-A ''", "-A .rel": names importlib refuses
        startup_error(f"-A {app}: {exc}{_file_hint(app)}")
    if not attr:
        return get_default_registry()
    registry = getattr(module, attr, None)
    if not isinstance(registry, Registry):
        startup_error(f"-A {app}: {module_name}.{attr} is {'missing' if registry is None else 'not a redflow Registry'}")
    return registry


def _file_hint(app: str) -> str:
    """``-A app.py`` or ``-A pkg/app.py``: -A takes a module name, say which."""
    module_name, colon, attr = app.partition(":")
    if not (module_name.endswith(".py") or "/" in module_name):
        return ""
    dotted = module_name.removesuffix(".py").strip("./").replace("/", ".")
    return f"; -A takes a module name, not a file: try -A {dotted}{colon}{attr}"


def startup_error(message: str) -> NoReturn:
    """One log line a user can act on, then exit status 2 (as for a bad option)."""
    log.error("%s", message)
    raise SystemExit(EXIT_USAGE)


def _require_workflows(registry: Registry, app: str | None) -> None:
    if registry.list():
        return
    if app:
        startup_error(f"-A {app} defines no workflows: it must call define_workflow (or name a Registry as -A module:registry)")
    startup_error("no workflows to run: name the module that defines them with -A module (or -A module:registry)")


def _start(args: argparse.Namespace, registry: Registry, observers: Sequence[object], stop: Event) -> Worker | None:
    """Start the worker, waiting for a Redis that is not there or not ready yet
    (``--start-timeout``, default forever); a Redis that refuses us is a startup
    error. None: ``stop`` was set (a signal) while it waited."""
    # Here, not at the top: only this command needs the engine (the other commands start faster without it).
    from redflow.engine.startup import retry_until_ready
    from redflow.engine.worker import start_worker

    where = redacted_url(resolve_url(args.redis_url))
    queues = [q for q in (args.queues or "").split(",") if q] or None

    def start() -> Worker:
        return start_worker(
            registry,
            url=args.redis_url,
            prefix=args.prefix,
            queues=queues,
            concurrency=args.concurrency,
            lease_ms=args.lease_ms,
            cluster=args.cluster,
            observers=observers,
            app=args.app_name,
            blob_threshold=args.blob_threshold,
            compat=args.compat,
        )

    try:
        return retry_until_ready(start, where=where, timeout_s=args.start_timeout, stop=stop)
    except (RedisError, RedisClusterException) as exc:
        startup_error(f"cannot start the worker: Redis at {where}: {type(exc).__name__}: {exc}")
    except (RedflowError, ValueError) as exc:  # bad options, a bad URL (redis-py's word), not ready in time
        startup_error(f"cannot start the worker: {exc}")
    except KeyboardInterrupt:
        log.info("interrupted while waiting for Redis at %s", where)
        raise SystemExit(130) from None


def _worker(args: argparse.Namespace) -> int:
    if args.processes != 1:
        return supervise(args)
    metrics = None
    if args.metrics_port is not None:  # a bad option first, as argparse would
        try:  # an optional dependency (prometheus_client): imported only when asked for
            from redflow.ops.observe.metrics import start_metrics_server
        except ImportError as exc:
            startup_error(f"--metrics-port: {exc}")
        try:
            metrics = start_metrics_server(args.metrics_port)
        except RedflowError as exc:  # a bad address, a port in use
            startup_error(f"--metrics-port: {exc}")
    registry = load_registry(args.app)
    _require_workflows(registry, args.app)
    # The handlers go in before the worker starts: a signal while it starts (or
    # waits for Redis) must not meet the default action, which kills the process.
    signals_seen: list[int] = []
    stop_requested = Event()
    started: list[Worker] = []

    def on_signal(signum: int) -> None:
        signals_seen.append(signum)
        if len(signals_seen) == 1:
            log.info("signal %d: stopping gracefully (up to %.0fs); send it again to stop at once", signum, args.grace)
            stop_requested.set()
            if started:
                gevent.spawn(started[0].stop, args.grace)
        else:
            log.warning("second signal: exiting at once; leases expire and other workers take the runs over")
            logging.shutdown()
            os._exit(1)

    on_stop_signals(on_signal)
    worker = _start(args, registry, [metrics.observer] if metrics else [], stop_requested)
    if worker is None:
        log.info("stopped before the worker started")
        return 0
    started.append(worker)
    if stop_requested.is_set():  # the signal came while it started
        gevent.spawn(worker.stop, args.grace)
    if metrics:
        metrics.observer.attach(worker)
    worker.join()
    if metrics:
        metrics.stop()
    return 0


def register(sub: Any) -> None:
    """Add ``worker`` (the command :func:`redflow.ops.cli.parser.build_parser` adds first)."""
    worker = sub.add_parser("worker", help="run a worker", description="Run a worker: claim runs of the -A workflows and run them.")
    worker.add_argument("-A", "--app", help="module (or module:registry) whose workflows to run")
    worker.add_argument("-c", "--concurrency", type=positive_int, default=10, help="greenlet consumer slots (default 10)")
    worker.add_argument("-Q", "--queues", help="comma-separated queues (default: those of the workflows)")
    worker.add_argument("--redis-url", default=None, help="default: $REDIS_URL or redis://127.0.0.1:6379/0")
    worker.add_argument("--cluster", action="store_true", help="the URL names a Redis Cluster node (as redis+cluster:// URLs do)")
    worker.add_argument("--prefix", default=None, help="key prefix (default: $REDFLOW_PREFIX or redflow:v1)")
    worker.add_argument("--lease-ms", type=int, default=5000, help="run lease; renewed every half of it (default 5000)")
    worker.add_argument("--processes", type=positive_int, default=1, help="worker processes under a supervisor (default 1: no supervisor)")
    worker.add_argument("--grace", type=float, default=30.0, help="seconds a graceful stop waits for runs in flight (default 30)")
    worker.add_argument(
        "--start-timeout",
        type=non_negative_float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for a Redis that is down, loading or full at start (default: keep trying)",
    )
    worker.add_argument("--metrics-port", default=None, metavar="[HOST:]PORT", help="serve Prometheus metrics (host default 127.0.0.1)")
    interop = worker.add_argument_group("sharing Redis with the asyncio redflow 0.1.x (docs/interop.md)")
    interop.add_argument(
        "--app-name", default=None, metavar="NAME", help="app name scoping the queues, as its workers do (default: $REDFLOW_APP)"
    )
    interop.add_argument(
        "--blob-threshold", type=non_negative_int, default=None, metavar="BYTES", help="store payloads over BYTES as @blob: references"
    )
    interop.add_argument(
        "--compat", choices=COMPAT_MODES, default=None, help="array step records, blobs over 1 KiB and terminal streams, for its workers"
    )
    worker.set_defaults(func=_worker)
