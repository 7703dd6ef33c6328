"""The ``redflow-gevent`` command (``setup.py``'s console script ``redflow.ops.cli:main``).

gevent monkey-patches first thing, before ``redis`` or ``ssl`` is imported
(``redflow/__init__.py`` is kept light so that this holds): every module of
this package is imported after this one, so each may import what it needs
at its top.

Modules: ``parser`` (the top parser and ``main``), ``worker`` (and
``supervisor``: ``worker --processes N``), ``common`` (what the commands that
read Redis share), and one module per command: ``runs``, ``queues``,
``cron``, ``workers``, ``stats``, ``dashboard``.
"""

from redflow.ops.patching import patch_all

patch_all()  # gevent's monkey.patch_all(), its plugins looked up once (redflow/ops/patching.py)

from redflow.ops.cli.parser import build_parser, main, parse_args  # noqa: E402

__all__ = ["build_parser", "main", "parse_args"]
