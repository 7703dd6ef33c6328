"""The dashboard's read-only pages: overview, workflows, and one run.

Each returns a title and a body of escaped HTML; the app wraps it in the
page template. Reads are bounded whatever Redis holds: a page of runs, the
workers' records, one pipelined round trip per chart, the newest
``DEFAULT_MAX_RUNS`` runs per workflow, the first ``CHILDREN_SHOWN`` children.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from redflow.client import RedflowClient
from redflow.core.keys import RUN_STATUSES
from redflow.core.models import Run, Step
from redflow.ops.dashboard.charts import Bar, timeline
from redflow.ops.dashboard.live import stream_section
from redflow.ops.dashboard.markup import badge, error_html, h, options, pretty, run_link, short_text, switch, table, when
from redflow.ops.dashboard.operations import crons_section, runs_section, tags_html
from redflow.ops.dashboard.series import CHART_NAMES, render_charts
from redflow.ops.dashboard.web import HttpError, one
from redflow.ops.format import (
    describe_wait,
    fmt_attempt,
    fmt_duration,
    fmt_error,
    fmt_optional_s,
    fmt_rate,
    fmt_seconds,
    fmt_step_outcome,
    fmt_time,
    fmt_tries,
    preview,
)
from redflow.ops.views.flow import flow_rows
from redflow.ops.views.policies import policy_facts, run_policy
from redflow.ops.views.queues import queue_counts, workflow_names
from redflow.ops.views.stats import DEFAULT_MAX_RUNS, WINDOWS, parse_window, workflow_stats
from redflow.ops.views.workers import list_workers

MAX_LIMIT = 500
DEFAULT_LIMIT = 50
CHART_WINDOWS = ("1h", "24h")
CHILDREN_SHOWN = 50
TIMELINE_ROWS = 200
RUNNING_SHOWN = 3
#: What the run page says after an action (a fixed set: nothing from the request is echoed).
NOTICES = {
    "canceled": "Run canceled.",
    "cancel-requested": "Cancel requested: its worker stops the run.",
    "cancel-refused": "Not canceled: the run already ended.",
    "retried": "Queued again; its succeeded steps will replay.",
    "retry-refused": "Not retried: only failed or canceled runs can be retried.",
}

Render = Callable[..., str]


class Pages:
    """Builds page bodies from Redis; ``render(template, **values)`` fills a template."""

    def __init__(self, client: RedflowClient, render: Render, actions: Callable[[str, Run], str], *, actions_enabled: bool = False) -> None:
        self.client = client
        self._render = render
        self._actions = actions
        self.actions_enabled = actions_enabled

    # -- overview ---------------------------------------------------------------
    def overview(self, base: str, query: dict[str, list[str]]) -> str:
        workflow, status, limit = filters(query)
        window = chart_window(query)
        client = self.client
        names = workflow_names(client)
        counts = "".join(f'<a href="{h(base)}/?status={h(s)}">{badge(s)} {h(n)}</a>' for s, n in client.status_counts().items())
        runs, tag_input = runs_section(client, self.actions_enabled, base, query, limit)
        crons = crons_section(client, self.actions_enabled, base)
        charts = render_charts(client, window)
        return self._render(
            "overview.html", base=h(base), queues=self._queues(), limits=self._limits(), crons=crons, counts=counts, runs=runs,
            tag_input=tag_input,
            max_limit=MAX_LIMIT, limit=limit, window=h(window), workers=self.workers(base),
            window_switch=switch(f"{base}/", CHART_WINDOWS, window, workflow=workflow, status=status, limit=str(limit)),
            charts="".join(f'<figure class="chart-box">{charts[name]}</figure>' for name in CHART_NAMES),
            workflow_options=options(names + ([workflow] if workflow and workflow not in names else []), workflow),
            status_options=options(RUN_STATUSES, status),
        )  # fmt: skip

    def _queues(self) -> str:
        return table(
            ("queue", "ready", "prioritized", "processing", "scheduled"),
            ([h(q.queue), h(q.ready), h(q.prioritized), h(q.processing), h(q.scheduled)] for q in queue_counts(self.client)),
            "No queues yet: no worker has synced a workflow.",
            numeric=(1, 2, 3, 4),
        )

    def _limits(self) -> str:
        """Per workflow with limits: runs running / limit, and runs held back (none: no section)."""
        flows = flow_rows(self.client)
        if not flows:
            return ""
        rows = ([h(f.workflow), h(f.queue), h(f.running_text), h(f.held), h(f.limits)] for f in flows)
        return (
            "<section><h2>Flow control</h2>"
            + table(("workflow", "queue", "running", "held", "limits"), rows, "", numeric=(2, 3))
            + "</section>"
        )

    def workers(self, base: str) -> str:
        """The workers' records: where each runs, since when, its busy slots and what it runs."""
        rows = []
        for view in list_workers(self.client):
            r = view.record
            running = " ".join(run_link(base, run_id, short=True) for run_id, _ in r.running[:RUNNING_SHOWN])
            more = r.busy - min(len(r.running), RUNNING_SHOWN)
            rows.append([
                f'<span class="badge worker-{h(view.state)}">{h(view.state)}</span>', short_id(r.id),
                h(r.host), h(r.pid), h(", ".join(r.queues)), f"{h(r.busy)} / {h(r.slots)}", h(r.done),
                when(r.started_at), h(fmt_seconds(view.seen_s_ago)) + " ago",
                running + (f' <span class="muted">+{h(more)}</span>' if more > 0 else ""),
            ])  # fmt: skip
        headers = ("state", "worker", "host", "pid", "queues", "busy", "done", "started (UTC)", "last beat", "running")
        return table(headers, rows, "No workers: none has beaten in the last few minutes.", numeric=(3, 5, 6), wrap=(4, 7, 8))

    # -- workflows --------------------------------------------------------------
    def workflows(self, base: str, query: dict[str, list[str]]) -> str:
        window = one(query, "window") or "24h"
        if window not in WINDOWS:
            raise HttpError("400 Bad Request", f"window is one of {', '.join(WINDOWS)}.")
        stats = workflow_stats(self.client, parse_window(window))
        rows = [
            [f'<a href="{h(base)}/?workflow={h(s.workflow)}">{h(s.workflow)}</a>{"*" if s.partial else ""}', h(f"{s.runs:,}"),
             *(h(n) if n else '<span class="muted">0</span>'
               for n in (*(s.counts[st] for st in RUN_STATUSES), s.expired, s.skipped, s.collapsed)),
             h(fmt_rate(s.success_rate)), h(fmt_optional_s(s.p50_s)), h(fmt_optional_s(s.p95_s)),
             f'{run_link(base, s.latest_error_run, short=True)}<br><span class="error-text">{h(fmt_error(s.latest_error))}</span>'
             if s.latest_error_run else '<span class="muted">-</span>']
            for s in stats
        ]  # fmt: skip
        headers = ("workflow", "runs", *RUN_STATUSES, "expired", "skipped", "collapsed", "success", "p50", "p95", "latest error")
        numeric = tuple(range(1, 2 + len(RUN_STATUSES) + 6))
        partial = any(s.partial for s in stats)
        note = f'<p class="muted">* figures from the newest {DEFAULT_MAX_RUNS:,} runs of the window.</p>' if partial else ""
        return self._render(
            "workflows.html", window=h(window), note=note, switch=switch(f"{base}/workflows", WINDOWS, window),
            table=table(headers, rows, "No workflows: no worker has synced one.", numeric=numeric),
        )  # fmt: skip

    # -- one run ------------------------------------------------------------------
    def run(self, base: str, run_id: str, query: dict[str, list[str]]) -> tuple[str, str]:
        run = self.client.get_run(run_id)
        if run is None:
            raise HttpError("404 Not Found", f"No run {run_id}.")
        notice = NOTICES.get(one(query, "notice") or "")
        outcome = ""
        if run.status == "succeeded":
            outcome = f"<section><h2>Output</h2><pre>{h(pretty(run.output))}</pre></section>"
        elif run.error:
            outcome = f"<section><h2>Error</h2>{error_html(run.error)}</section>"
        steps = self.client.get_steps(run_id)
        body = self._render(
            "run.html", base=h(base), id=h(run.id), badge=badge(run.status), input=h(pretty(run.input)), outcome=outcome,
            notice=f'<div class="notice">{h(notice)}</div>' if notice else "",
            facts="".join(f"<dt>{h(k)}</dt><dd>{v}</dd>" for k, v in self._facts(base, run, steps)),
            actions=self._actions(base, run), steps=steps_table(steps), children=self._children(base, run),
            stream=stream_section(self.client, base, run),
            timeline=run_timeline(run, steps, self.client.now_ms() / 1000.0),
        )  # fmt: skip
        return run.id, body

    def _facts(self, base: str, run: Run, steps: Sequence[Step]) -> list[tuple[str, str]]:
        """The run's facts as (name, HTML): what it is waiting for while parked, its tags and progress."""
        facts = [
            ("workflow", f'<a href="{h(base)}/?workflow={h(run.workflow)}">{h(run.workflow)}</a>'), ("queue", h(run.queue)),
            ("attempt", h(fmt_attempt(run))), ("created", h(fmt_time(run.created_at))), ("started", h(fmt_time(run.started_at))),
            ("finished", h(fmt_time(run.finished_at))), ("duration", h(fmt_duration(run.started_at, run.finished_at))),
            ("parent", run_link(base, run.parent_run_id) if run.parent_run_id else "-"),
            ("cancel", h(run.cancel_reason or ("requested" if run.cancel_requested_at else "-"))),
            ("tags", tags_html(run.tags, base) if run.tags else "-"),
        ]  # fmt: skip
        if run.status == "scheduled" and run.parked_for:
            facts.append(("waiting", h(describe_wait(run, steps))))
        if run.progress is not None:
            facts.append(("progress", f"<code>{h(preview(run.progress, 300))}</code>"))
        facts += [(name, h(text)) for name, text in policy_facts(run_policy(self.client, run), run.status)]
        return facts

    def _children(self, base: str, run: Run) -> str:
        ids = self.client.list_children(run.id)
        if not ids:
            return ""
        children = [child for child in (self.client.get_run(i) for i in ids[:CHILDREN_SHOWN]) if child is not None]
        rows = (
            [run_link(base, c.id, short=True), h(c.workflow), badge(c.status), h(fmt_duration(c.started_at, c.finished_at))]
            for c in children
        )
        more = f'<p class="muted">and {len(ids) - CHILDREN_SHOWN:,} more</p>' if len(ids) > CHILDREN_SHOWN else ""
        listing = table(("run", "workflow", "status", "duration"), rows, "No children.")
        return f"<section><h2>Children ({len(ids):,})</h2>{listing}{more}</section>"


def short_id(worker_id: str) -> str:
    """A worker id cut to its first 8 hex digits (the whole id in the tooltip)."""
    shown = short_text(worker_id)
    shown = shown if len(shown) <= 16 else shown[:15] + "…"
    return f'<span class="mono" title="{h(worker_id)}">{h(shown)}</span>'


def steps_table(steps: list[Step]) -> str:
    rows = (
        [
            h(s.seq),
            f"<code>{h(s.name)}</code>",
            badge(s.status) + (f' <span class="muted">{h(fmt_tries(s))}</span>' if s.tries else ""),
            h(fmt_time(s.started_at)),
            h(fmt_duration(s.started_at, s.finished_at)),
            error_html(s.error) if s.error else f"<code>{h(fmt_step_outcome(s, 300))}</code>",
        ]
        for s in steps
    )
    return table(("seq", "step", "status", "started (UTC)", "duration", "output / error"), rows, "No steps yet.", numeric=(0,))


def timeline_bars(run: Run, steps: list[Step], now_s: float) -> tuple[list[Bar], float]:
    """The run's wait, its run and each step as bars from its creation; and the span they cover."""
    started = [s for s in steps if s.started_at is not None]
    t0 = min([t for t in (run.created_at, run.started_at, *(s.started_at for s in started)) if t is not None], default=now_s)
    end = run.finished_at or now_s
    bars = []
    if run.created_at is not None:
        bars.append(Bar("waiting to start", 0.0, (run.started_at or end) - t0, "queued", "created to first start"))
    if run.started_at is not None:
        bars.append(Bar("run", run.started_at - t0, end - t0, run.status, f"attempt {fmt_attempt(run)}"))
    for s in sorted(started, key=lambda s: (s.started_at or 0.0, s.seq)):
        replayed = s.status == "succeeded" and s.attempt is not None and s.attempt < run.attempt
        note = f"replayed: ran in attempt {s.attempt}" if replayed else (f"attempt {s.attempt}" if s.attempt and run.attempt > 1 else "")
        finished = s.finished_at if s.finished_at is not None else end
        bars.append(Bar(s.name, (s.started_at or t0) - t0, finished - t0, s.status, note, replayed))
    span = max([end - t0, *(b.end_s for b in bars)], default=0.0)
    return bars, span


def run_timeline(run: Run, steps: list[Step], now_s: float) -> str:
    bars, span = timeline_bars(run, steps, now_s)
    shown = bars[:TIMELINE_ROWS]
    return timeline(f"Timeline of {run.id}", shown, span, more=len(bars) - len(shown))


# -- query values ---------------------------------------------------------------------


def filters(query: dict[str, list[str]]) -> tuple[str | None, str | None, int]:
    """Workflow, status and limit from the query string; 400 on a bad one."""
    workflow = one(query, "workflow") or None
    status = one(query, "status") or None
    if workflow is not None and len(workflow) > 200:
        raise HttpError("400 Bad Request", "The workflow name is too long.")
    if status is not None and status not in RUN_STATUSES:
        raise HttpError("400 Bad Request", f"Unknown status; use one of {', '.join(RUN_STATUSES)}.")
    raw_limit = one(query, "limit") or str(DEFAULT_LIMIT)
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise HttpError("400 Bad Request", f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    return workflow, status, int(raw_limit)


def chart_window(query: dict[str, list[str]]) -> str:
    window = one(query, "window") or CHART_WINDOWS[0]
    if window not in CHART_WINDOWS:
        raise HttpError("400 Bad Request", f"window is one of {', '.join(CHART_WINDOWS)}.")
    return window
