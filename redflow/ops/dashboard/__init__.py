"""A small web dashboard: ``redflow-gevent dashboard --port 8787``.

A plain WSGI app served by gevent's WSGI server. The overview shows charts
(finished runs per minute by status, queue depth, enqueue-to-start and
attempt-duration percentiles, over the last hour or day), the live workers,
queues, cron triggers and the recent runs, filterable by workflow and
status; the Workflows page has per-workflow figures over a window; a run's
page has a step timeline, its steps with outputs and errors, its parent and
children, and cancel / retry buttons.

Read-only pages are meant to be safe to expose: every value is HTML-escaped,
no script runs in the page (a strict Content-Security-Policy says so; the
charts are server-rendered SVG), and neither the Redis URL nor the token is
ever shown. Actions are POST only and need the token given by ``--token`` or
``REDFLOW_DASHBOARD_TOKEN``, compared in constant time; with no token
configured every action is refused. The token travels in the form body (or
an ``Authorization: Bearer`` header), never in a cookie, so another site
cannot make a browser act on its behalf.

Modules: ``app`` (WSGI, routing, actions), ``pages`` (what each page
shows), ``markup`` (escaped HTML pieces), ``serving`` (the server and the
sub-command); the charts are drawn by :mod:`redflow.ops.charts` from what
:mod:`redflow.ops.series` reads.
"""

from redflow.ops.dashboard.app import ACTIONS_OFF, MIN_TOKEN_CHARS, NOTICES, TOKEN_ENV, Dashboard, resolve_token
from redflow.ops.dashboard.serving import register, serve, start_wsgi_server

__all__ = ["ACTIONS_OFF", "MIN_TOKEN_CHARS", "NOTICES", "TOKEN_ENV", "Dashboard", "register", "resolve_token", "serve", "start_wsgi_server"]
