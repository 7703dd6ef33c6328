"""What ``runs show``, the dashboard and the stats say of retry policies and
deadlines (issue 30 item 5): the policy from the workflow's synced metadata,
the attempts, the next try while a retry is scheduled, the deadlines, and
the runs a deadline failed."""

from __future__ import annotations

import re

from helpers import request, wait_until
from test_deadlines import expired_error, outlasting

from redflow import RetryPolicy, define_workflow
from redflow.core import codec
from redflow.ops.dashboard import serve
from redflow.ops.format import fmt_time
from redflow.ops.views.policies import DEFAULT_POLICY_TEXT, describe_policy


def page(client, path):
    """One page of a read-only dashboard over ``client``."""
    server = serve(client, "127.0.0.1", 0, token=None)
    try:
        return request(server.server_port, "GET", path)[2]
    finally:
        server.stop(timeout=1)


def test_a_policy_in_words():
    assert describe_policy(None) == DEFAULT_POLICY_TEXT == "default: 250ms doubling up to 30.00s, +0-99ms"
    summary = RetryPolicy(initial_delay=600, factor=2, max_delay=3600, jitter=0.1, retry_on=(OSError,), no_retry_on=KeyError).summary()
    assert describe_policy(summary) == "10m00s x2 up to 1h00m, jitter 10%, only OSError, no retry on KeyError"


def test_runs_show_and_the_run_page_show_the_policy_the_next_try_and_the_deadlines(start, registry, client, cli):
    @define_workflow(
        "patient",
        registry=registry,
        retry=RetryPolicy(max_attempts=3, initial_delay=600, max_delay=3600, jitter=0.1, no_retry_on=(KeyError,)),
        start_within=60,
        timeout=7200,
    )
    def patient(ctx):
        raise ConnectionError("down")

    start()
    handle = patient.run(None, client=client)
    wait_until(lambda: client.get_run(handle.id).next_retry_at is not None, message="the retry to be scheduled")
    run = client.get_run(handle.id)
    next_try, start_by, end_by = fmt_time(run.available_at), fmt_time(run.start_by), fmt_time(run.deadline_at)

    code, out, _ = cli("runs", "show", handle.id)
    assert code == 0
    assert "attempt   1/3" in out
    assert "retries   10m00s x2 up to 1h00m, jitter 10%, no retry on KeyError" in out
    assert f"next try  {next_try}" in out
    assert f"deadline  start by {start_by}; end by {end_by}" in out
    code, out, _ = cli("runs", "show", handle.id, "--json")
    policy = codec.loads(out)["policy"]
    assert (policy["attempts"], policy["next_retry_at"], policy["deadline_at"]) == ("1/3", run.available_at, run.deadline_at)

    run_page = page(client, f"/runs/{handle.id}")
    assert "<dt>retries</dt><dd>10m00s x2 up to 1h00m, jitter 10%, no retry on KeyError</dd>" in run_page
    assert f"<dt>next try</dt><dd>{next_try}</dd>" in run_page
    assert f"<dt>deadline</dt><dd>start by {start_by}; end by {end_by}</dd>" in run_page


def test_a_run_without_policy_or_deadline_shows_the_default_and_no_deadline(start, registry, client, cli):
    @define_workflow("plain", registry=registry)
    def plain(ctx):
        return 1

    start()
    handle = plain.run(None, client=client)
    handle.result(10)
    code, out, _ = cli("runs", "show", handle.id)
    assert code == 0 and f"retries   {DEFAULT_POLICY_TEXT}" in out
    assert "next try" not in out and "deadline" not in out


def test_the_workflows_page_counts_the_runs_a_deadline_failed(start, registry, client):
    bounded = outlasting("bounded", registry, timeout=0.3)
    start()
    expired_error(bounded.run(None, client=client), "timeout")
    workflows = page(client, "/workflows")
    headers = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<th[^>]*>(.*?)</th>", workflows, re.S)]
    row = next(row for row in re.findall(r"<tr[^>]*>(.*?)</tr>", workflows, re.S) if ">bounded<" in row)
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    shown = dict(zip(headers, cells))
    assert (shown["runs"], shown["failed"], shown["expired"]) == ("1", "1", "1")


def test_a_step_with_a_policy_shows_the_try_that_wrote_it(start, registry, client, cli):
    tries = []

    @define_workflow("gateway", registry=registry)
    def gateway(ctx):
        def call():
            tries.append(1)
            if len(tries) < 2:
                raise ConnectionError("busy")
            return "paid"

        return ctx.step.run("pay", call, retry=RetryPolicy(max_attempts=3, initial_delay=0.05))

    start()
    handle = gateway.run(None, client=client)
    assert handle.result(10) == "paid"
    code, out, _ = cli("runs", "show", handle.id)
    assert code == 0 and "pay   succeeded (try 2)" in out
    assert '<span class="muted">try 2</span>' in page(client, f"/runs/{handle.id}")
