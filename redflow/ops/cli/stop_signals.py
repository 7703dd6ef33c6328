"""The one place the commands hear SIGTERM and SIGINT.

The worker, the supervisor and the dashboard each stop gracefully on the first
of these and (worker, supervisor) at once on the second; all install their
handlers through :func:`on_stop_signals` so the signals handled, and the way
they are (gevent's handlers: the callback runs in a greenlet, never inside an
arbitrary frame of a running greenlet), are said once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import gevent

#: The signals that ask a command to stop: a service manager's (SIGTERM) and Ctrl-C (SIGINT).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signals(on_signal: Callable[[int], object]) -> Callable[[], None]:
    """Call ``on_signal(signum)`` in a greenlet for each SIGTERM or SIGINT from now on;
    returns what puts the default handlers back."""
    handlers = [gevent.signal_handler(signum, on_signal, signum) for signum in STOP_SIGNALS]

    def cancel() -> None:
        for handler in handlers:
            handler.cancel()

    return cancel
