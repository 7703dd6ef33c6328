"""A small web dashboard: ``redflow-gevent dashboard --port 8787``.

A plain WSGI app served by gevent's WSGI server. The overview shows charts
(finished runs per minute by status, queue depth, enqueue-to-start and
attempt-duration percentiles, over the last hour or day), the live workers,
queues, cron triggers and the recent runs, filterable by workflow and
status; the Workflows page has per-workflow figures over a window; a run's
page has a step timeline, its steps with outputs and errors, its parent and
children, its output stream (live while it runs, as server-sent events), and
cancel / retry buttons. Under ``/api/`` the same app serves a JSON API (start
runs, read them and their streams, emit events), every route behind the token.

Read-only pages are meant to be safe to expose: every value is HTML-escaped,
the only script is the dashboard's own ``stream.js`` on the page of a running
run (a strict Content-Security-Policy allows no other, nor inline code; the
charts are server-rendered SVG), and neither the Redis URL nor the token is
ever shown. Actions need the token (see :mod:`redflow.ops.dashboard.access`).

Modules: ``app`` (WSGI, routing, the page frame, the actions on one run,
``serve``), ``pages`` (what each page shows), ``live`` (a run's stream, live), ``operations`` (filters, paging,
bulk and cron controls), ``api`` (the JSON API's routes) and ``api_body``
(its request bodies, read bounded and checked), ``markup`` (escaped HTML
pieces), ``web`` (request and response values), ``access`` (the token),
``series`` (what the charts read) and ``charts`` (SVG drawing); ``assets/``
holds the templates, the stylesheet and ``stream.js``. The ``dashboard`` command is :mod:`redflow.ops.cli.dashboard`.
"""

from redflow.ops.dashboard.access import ACTIONS_OFF, MIN_TOKEN_CHARS, TOKEN_ENV, resolve_token
from redflow.ops.dashboard.app import Dashboard, serve
from redflow.ops.dashboard.pages import NOTICES

__all__ = ["ACTIONS_OFF", "MIN_TOKEN_CHARS", "NOTICES", "TOKEN_ENV", "Dashboard", "resolve_token", "serve"]
