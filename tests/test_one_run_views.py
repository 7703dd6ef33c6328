"""What ``runs show``, the run page, ``stats``, the Workflows page and the metrics say of
singleton and debounce (issue 30 item 5): the policy of a run, and the calls a singleton
skipped or a debounce collapsed into it."""

from __future__ import annotations

import re

from test_policy_views import page

from redflow import Debounce, Singleton, define_workflow
from redflow.ops.observe.metrics import MetricsObserver


def workflow_row(client, name):
    workflows = page(client, "/workflows")
    headers = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<th[^>]*>(.*?)</th>", workflows, re.S)]
    row = next(row for row in re.findall(r"<tr[^>]*>(.*?)</tr>", workflows, re.S) if f">{name}<" in row)
    return dict(zip(headers, [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]))


def test_runs_show_the_run_page_stats_and_metrics_count_skipped_and_collapsed_calls(registry, client, cli, start):
    @define_workflow("one", registry=registry, singleton=Singleton(key=lambda i: "k", on_conflict="skip"))
    def one(ctx):
        return None

    @define_workflow("later", registry=registry, debounce=Debounce(period=60, max_wait=600))
    def later(ctx):
        return None

    client.sync_registry(registry)  # stats list synced workflows
    held = [one.run(n, client=client, delay=60) for n in range(3)][0]
    collapsed = [later.run(n, client=client) for n in range(4)][0]

    code, out, _ = cli("runs", "show", held.id)
    assert code == 0 and "singleton on conflict skip; 2 call(s) skipped into this run" in out
    run_page = page(client, f"/runs/{collapsed.id}")
    assert "<dt>debounce</dt><dd>starts 60s after the last call, at most 600s after the first; 3 call(s) collapsed into this run</dd>" in (
        run_page
    )
    code, out, _ = cli("stats")
    assert code == 0
    _, header, *rows = out.splitlines()  # under "runs created in the last 1h"
    columns = header.split()
    by_name = {row.split()[0]: dict(zip(columns, row.split())) for row in rows if row.split()}
    assert (by_name["one"]["SKIPPED"], by_name["one"]["COLLAPSED"]) == ("2", "0")
    assert (by_name["later"]["SKIPPED"], by_name["later"]["COLLAPSED"]) == ("0", "3")
    assert (workflow_row(client, "one")["skipped"], workflow_row(client, "later")["collapsed"]) == ("2", "3")

    observer = MetricsObserver()
    observer.attach(start(observers=[observer]))  # the worker its collector reads through (nothing is due yet)
    from prometheus_client import generate_latest

    text = generate_latest(observer.registry).decode()
    assert 'redflow_runs_skipped_total{workflow="one"} 2.0' in text
    assert 'redflow_runs_collapsed_total{workflow="later"} 3.0' in text
