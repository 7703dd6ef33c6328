"""``redflow-gevent dashboard``: serve the web dashboard (:mod:`redflow.ops.dashboard`)
until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import gevent

from redflow.core.errors import RedflowError
from redflow.ops.cli.common import connect, connection_options
from redflow.ops.cli.stop_signals import on_stop_signals
from redflow.ops.cli.values import port_number, usage_error
from redflow.ops.dashboard import TOKEN_ENV, resolve_token, serve

log = logging.getLogger("redflow.dashboard")


def _dashboard_command(args: argparse.Namespace) -> int:
    try:
        token = resolve_token(args.token)
        client = connect(args)
        server = serve(client, args.host, args.port, token=token)
    except (RedflowError, ValueError) as exc:  # a token too short, a port in use, a bad Redis URL
        usage_error(f"dashboard: {exc}")
    log.info("dashboard on http://%s:%d/ (actions %s)", args.host, server.server_port, "on" if token else "off: no token")
    on_stop_signals(lambda _signum: gevent.spawn(server.stop, 2))
    server.serve_forever()
    client.close()
    return 0


def register(subparsers: Any) -> None:
    """Add ``dashboard`` (see ``redflow.ops.cli.parser.COMMAND_MODULES``)."""
    parser = subparsers.add_parser("dashboard", help="serve the web dashboard")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8787, help="default 8787 (0: any free port)")
    parser.add_argument("--token", default=None, help=f"enables cancel/retry (prefer ${TOKEN_ENV}: flags show in ps)")
    connection_options(parser)
    parser.set_defaults(func=_dashboard_command)
