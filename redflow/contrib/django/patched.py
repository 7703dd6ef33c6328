"""``python -m redflow.contrib.django.patched SCRIPT [ARGS...]``: gevent's
monkey patching first, then SCRIPT run as ``python SCRIPT ARGS...`` runs it
(``sys.argv``, and the script's directory first on ``sys.path``).

``manage.py redflow_worker`` runs itself again this way when it finds the
standard library unpatched (see its module). Like ``python -m gevent.monkey``,
but with the script's directory on the path, so that ``python
/srv/app/manage.py redflow_worker`` started from elsewhere still imports the project.
"""

from redflow.ops.patching import patch_all

patch_all()  # gevent's monkey.patch_all(), its plugins looked up once (redflow/ops/patching.py)

import os
import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m redflow.contrib.django.patched SCRIPT [ARGS...]")
    script = sys.argv[1]
    sys.argv[:] = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
