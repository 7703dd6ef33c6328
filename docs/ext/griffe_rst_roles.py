"""A griffe extension for the docs site: redflow's docstrings cite code with
Sphinx roles (``:class:`Run```); mkdocstrings renders Markdown, where a role
would show as ``:class:`` before the name. Each role becomes inline code of
its target (``~a.b.C`` shows as ``C``, as Sphinx does)."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


def _plain(match: re.Match[str]) -> str:
    target = match.group(1)
    shown = target.rsplit(".", 1)[-1] if match.group(0).count("`~") else target
    return f"`{shown}`"


class RstRoles(Extension):
    """Rewrite Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_plain, obj.docstring.value)
