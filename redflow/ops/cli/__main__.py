"""``python -m redflow.ops.cli``: the ``redflow-gevent`` command (how the supervisor
runs its children when the console script is not installed)."""

import sys

from redflow.ops.cli import main

sys.exit(main())
