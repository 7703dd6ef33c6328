"""HTML pieces every dashboard page uses. Each function returns markup whose
every value is escaped; callers pass raw values, never HTML, unless a
parameter says it takes cells that are already HTML."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from redflow.ops.format import fmt_error, fmt_time
from redflow.ops.shown import shown_json

SHOWN_JSON_CHARS = 20_000
#: A generated id: a word, then a UUID (``run_8aebe4f7-50ac-...``, ``worker_69a2f3eb-...``).
_UUID_ID = re.compile(r"([a-z]+_[0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def h(value: Any) -> str:
    """Escape anything for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def pretty(value: Any) -> str:
    """Indented JSON for a run page, bounded; never fails (see :mod:`redflow.ops.shown`)."""
    return shown_json(value, SHOWN_JSON_CHARS, indent=True)


def badge(status: str) -> str:
    return f'<span class="badge status-{h(status)}">{h(status)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str, numeric: Sequence[int] = (), wrap: Sequence[int] = ()) -> str:
    """An HTML table; ``rows`` hold cells that are already HTML (escaped). Cells
    stay on one line, but those of the ``wrap`` columns (and the last) may wrap,
    so that a wide table fits a narrow card."""
    rows = list(rows)
    if not rows:
        return f'<p class="empty">{h(empty)}</p>'

    def cls(i: int) -> str:
        names = " ".join(name for name, columns in (("num", numeric), ("wrap", wrap)) if i in columns)
        return f' class="{names}"' if names else ""

    head = "".join(f"<th{cls(i)}>{h(name)}</th>" for i, name in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def when(unix_s: float | None) -> str:
    """A time as the tables show it (UTC), its date and its time each kept on one line."""
    return " ".join(f'<span class="nowrap">{h(part)}</span>' for part in fmt_time(unix_s).split(" "))


def options(values: Iterable[str], chosen: str | None) -> str:
    """``<option>``s of a filter, "all" first."""
    items = ['<option value="">all</option>']
    items += [f'<option value="{h(v)}"{" selected" if v == chosen else ""}>{h(v)}</option>' for v in values]
    return "".join(items)


def run_url(base: str, run_id: str) -> str:
    return f"{base}/runs/{quote(run_id, safe='')}"


def run_link(base: str, run_id: str, *, short: bool = False) -> str:
    """A link to a run's page; ``short`` (in lists) shows a generated id by its first 8 hex digits."""
    return f'<a class="mono" href="{h(run_url(base, run_id))}" title="{h(run_id)}">{h(short_text(run_id) if short else run_id)}</a>'


def short_text(generated_id: str) -> str:
    """``run_8aebe4f7-50ac-...`` -> ``run_8aebe4f7…`` (the full id goes in a tooltip); other ids as they are."""
    match = _UUID_ID.fullmatch(generated_id)
    return match.group(1) + "…" if match else generated_id


def error_html(error: dict[str, Any]) -> str:
    stack = error.get("stack")
    details = f"<details><summary>stack</summary><pre>{h(stack)}</pre></details>" if stack else ""
    return f"<pre>{h(fmt_error(error))}</pre>{details}"


def switch(base_url: str, choices: Iterable[str], chosen: str, **keep: str | None) -> str:
    """Links choosing a ``window``, the chosen one marked; ``keep`` carries the page's other query values."""
    links = []
    for choice in choices:
        query = urlencode({**{k: v for k, v in keep.items() if v}, "window": choice})
        current = ' aria-current="true" class="on"' if choice == chosen else ""
        links.append(f'<a href="{h(base_url)}?{h(query)}"{current}>{h(choice)}</a>')
    return f'<nav class="switch">{"".join(links)}</nav>'
