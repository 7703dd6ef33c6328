"""Serving a WSGI app on gevent's WSGI server: the dashboard and the metrics endpoint."""

from __future__ import annotations

import logging
import socket
from typing import Any

from gevent.pywsgi import LoggingLogAdapter, WSGIServer

from redflow.core.errors import RedflowError


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
