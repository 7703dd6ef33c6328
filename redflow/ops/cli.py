"""The ``redflow-gevent`` command.

gevent monkey-patches first thing, before ``redis`` or ``ssl`` is imported
(``redflow/__init__.py`` is kept light so that this holds).
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import importlib  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import TYPE_CHECKING

import gevent  # noqa: E402

if TYPE_CHECKING:
    from redflow.registry import Registry

log = logging.getLogger("redflow.cli")


def load_registry(app: str | None) -> "Registry":
    """Import ``module`` (its workflows register in the default registry) or
    ``module:attr`` (a Registry in that module)."""
    from redflow.registry import Registry, get_default_registry

    if not app:
        return get_default_registry()
    module_name, _, attr = app.partition(":")
    sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    if not attr:
        return get_default_registry()
    registry = getattr(module, attr, None)
    if not isinstance(registry, Registry):
        raise SystemExit(f"{app}: {attr!r} is not a redflow Registry")
    return registry


def _worker(args: argparse.Namespace) -> int:
    if args.processes != 1:
        from redflow.ops.supervisor import supervise

        return supervise(args)
    from redflow.engine.worker import start_worker

    registry = load_registry(args.app)
    queues = [q for q in (args.queues or "").split(",") if q] or None
    metrics = None
    if args.metrics_port is not None:
        try:
            from redflow.ops.metrics import metrics_for_cli
        except ImportError as exc:
            raise SystemExit(f"--metrics-port: {exc}") from None
        metrics = metrics_for_cli(args.metrics_port)
    worker = start_worker(
        registry,
        url=args.redis_url,
        prefix=args.prefix,
        queues=queues,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        cluster=args.cluster,
        observers=[metrics.observer] if metrics else (),
    )
    if metrics:
        metrics.observer.attach(worker)
    signals_seen = []

    def on_signal(signum: int) -> None:
        signals_seen.append(signum)
        if len(signals_seen) == 1:
            log.info("signal %d: stopping gracefully (up to %.0fs); send it again to stop at once", signum, args.grace)
            gevent.spawn(worker.stop, args.grace)
        else:
            log.warning("second signal: exiting at once; leases expire and other workers take the runs over")
            logging.shutdown()
            os._exit(1)

    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, on_signal, signum)
    worker.join()
    if metrics:
        metrics.stop()
    return 0


#: Modules adding a sub-command: each has ``register(subparsers)``, which adds
#: its parser and sets ``func`` (called with the parsed args, returns the exit code).
COMMAND_MODULES: tuple[str, ...] = ("redflow.ops.admin", "redflow.ops.dashboard", "redflow.bench.command")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="redflow-gevent", description="Durable Redis-backed workflows with a gevent worker.")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    sub = parser.add_subparsers(dest="command", required=True)

    worker = sub.add_parser("worker", help="run a worker")
    worker.add_argument("-A", "--app", help="module (or module:registry) whose workflows to run")
    worker.add_argument("-c", "--concurrency", type=int, default=10, help="greenlet consumer slots (default 10)")
    worker.add_argument("-Q", "--queues", help="comma-separated queues (default: those of the workflows)")
    worker.add_argument("--redis-url", default=None, help="default: $REDIS_URL or redis://127.0.0.1:6379/0")
    worker.add_argument("--cluster", action="store_true", help="the URL names a Redis Cluster node (as redis+cluster:// URLs do)")
    worker.add_argument("--prefix", default=None, help="key prefix (default: $REDFLOW_PREFIX or redflow:v1)")
    worker.add_argument("--lease-ms", type=int, default=5000)
    worker.add_argument("--processes", type=int, default=1, help="worker processes under one supervisor (default 1: no supervisor)")
    worker.add_argument("--grace", type=float, default=30.0, help="seconds a graceful stop waits for runs in flight")
    worker.add_argument("--metrics-port", default=None, metavar="[HOST:]PORT", help="serve Prometheus metrics (host default 127.0.0.1)")
    worker.add_argument("--log-level", dest="sub_log_level", default=None, choices=["debug", "info", "warning", "error"])
    worker.set_defaults(func=_worker)
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(name).register(sub)
        except Exception as exc:  # one broken optional command must not take `worker` down with it
            print(f"redflow-gevent: the commands of {name} are unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from redflow.ops.logs import setup_logging

    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what `worker --processes N` runs again
    setup_logging(getattr(args, "sub_log_level", None) or args.log_level, args.log_format)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
