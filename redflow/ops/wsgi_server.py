"""Serving the dashboard: gevent's WSGI server and the ``dashboard`` sub-command."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
from typing import Any

import gevent
from gevent.pywsgi import LoggingLogAdapter, WSGIServer

from redflow.client import RedflowClient
from redflow.core.errors import RedflowError
from redflow.ops.admin import connect, connection_options
from redflow.ops.dashboard.app import TOKEN_ENV, Dashboard, resolve_token

log = logging.getLogger("redflow.dashboard")


def start_wsgi_server(app: Any, host: str, port: int, *, what: str, access_log: str, access_level: int) -> WSGIServer:
    """Bind ``host:port`` (port 0: any free port) and serve ``app`` on gevent's WSGI server.

    Binding here rather than in gevent keeps a port in use a clean
    :class:`RedflowError` (gevent leaks the socket it failed to bind)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listener = socket.socket(family, kind, proto)
    except OSError as exc:
        raise RedflowError(f"cannot serve {what} on {host}:{port}: {exc}") from exc
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise RedflowError(f"cannot serve {what} on {host}:{port}: {exc}") from exc
    access = LoggingLogAdapter(logging.getLogger(access_log), access_level)
    server = WSGIServer(listener, app, log=access, error_log=logging.getLogger(access_log))
    server.start()
    return server


def serve(client: RedflowClient, host: str = "127.0.0.1", port: int = 8787, *, token: str | None = None) -> WSGIServer:
    """Start serving the dashboard on ``host:port`` (port 0: any free port) and return the server."""
    app = Dashboard(client, token=token)
    return start_wsgi_server(app, host, port, what="the dashboard", access_log="redflow.dashboard.access", access_level=logging.INFO)


def _dashboard_command(args: argparse.Namespace) -> int:
    try:
        token = resolve_token(args.token)
        client = connect(args)
        server = serve(client, args.host, args.port, token=token)
    except (RedflowError, ValueError) as exc:
        raise SystemExit(f"dashboard: {exc}") from None
    log.info("dashboard on http://%s:%d/ (actions %s)", args.host, server.server_port, "on" if token else "off: no token")
    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, lambda: gevent.spawn(server.stop, 2))
    server.serve_forever()
    client.close()
    return 0


def register(subparsers: Any) -> None:
    """Add ``dashboard``."""
    parser = subparsers.add_parser("dashboard", help="serve the web dashboard")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8787, help="default 8787")
    parser.add_argument("--token", default=None, help=f"enables cancel/retry (prefer ${TOKEN_ENV}: flags show in ps)")
    connection_options(parser)
    parser.set_defaults(func=_dashboard_command)
