"""Per-workflow figures (`redflow-gevent stats`, the Workflows page) against what the runs themselves say."""

import os
import subprocess

import gevent
import pytest
from helpers import CLI, ROOT, write_finished_runs

from redflow import NonRetryableError, RedflowError, define_workflow
from redflow.core import codec
from redflow.ops.views.stats import parse_window, workflow_stats


def percentile(values, p):
    """Nearest rank, in integers: the ceil(p * n / 100)-th smallest."""
    ordered = sorted(values)
    return ordered[-(-p * len(ordered) // 100) - 1] if ordered else None


def expected_from_runs(r, client, run_ids):
    """Counts, success rate and percentiles computed from the runs' own hashes."""
    rows = [r.hmget(client.keys.run(i), ["status", "startedAt", "finishedAt"]) for i in run_ids]
    counts = {s: sum(1 for row in rows if row[0] == s) for s in ("succeeded", "failed", "canceled", "queued", "running", "scheduled")}
    durations = [int(f) - int(s) for status, s, f in rows if status in ("succeeded", "failed", "canceled") and s and f]
    ended = counts["succeeded"] + counts["failed"]
    return {
        "counts": counts,
        "success_rate": counts["succeeded"] / ended if ended else None,
        "p50_s": percentile(durations, 50) / 1000 if durations else None,
        "p95_s": percentile(durations, 95) / 1000 if durations else None,
    }


def stats_cli(redis_url, prefix, *extra):
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix)
    return subprocess.run([CLI, "stats", *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_figures_of_runs_a_worker_ran_match_the_runs_themselves(start, registry, client, r, redis_url, prefix):
    @define_workflow("work", registry=registry, max_attempts=1)
    def work(ctx):
        gevent.sleep(ctx.input["s"])
        if ctx.input.get("fail"):
            raise NonRetryableError(f"bad input {ctx.input['n']}")
        return ctx.input["n"]

    start(concurrency=8)
    handles = [client.run("work", {"n": n, "s": (n % 7) * 0.01, "fail": n % 4 == 0}) for n in range(23)]
    for handle in handles:
        try:
            handle.result(20)
        except RedflowError:
            pass
    held = client.run("work", {"n": 99, "s": 0}, delay=3600)  # scheduled, in the window, never started
    ids = [h.id for h in handles] + [held.id]

    (stats,) = workflow_stats(client, 3600)
    expected = expected_from_runs(r, client, ids)
    assert stats.workflow == "work" and stats.runs == stats.sampled == 24 and not stats.partial
    assert {k: v for k, v in stats.counts.items() if v} == {k: v for k, v in expected["counts"].items() if v}
    assert (stats.success_rate, stats.p50_s, stats.p95_s) == (expected["success_rate"], expected["p50_s"], expected["p95_s"])
    last_failed = max((h for h in handles if h.status() == "failed"), key=lambda h: int(r.hget(client.keys.run(h.id), "finishedAt")))
    assert stats.latest_error_run == last_failed.id and stats.latest_error["message"] == client.get_run(last_failed.id).error["message"]

    done = stats_cli(redis_url, prefix, "--window", "1h", "--json")
    assert done.returncode == 0, done.stderr
    (listed,) = codec.loads(done.stdout)["workflows"]
    assert listed["counts"] == stats.counts and listed["p95_s"] == expected["p95_s"] and listed["partial"] is False
    table = stats_cli(redis_url, prefix).stdout
    assert "runs created in the last 1h" in table and "P95" in table and "NonRetryableError: bad input" in table


def test_the_window_selects_runs_by_creation_and_a_large_window_is_read_in_part(client, r, registry):
    @define_workflow("report", registry=registry)
    def report(ctx):
        return None

    client.sync_registry(registry)
    now = client.now_ms()
    recent = [
        {"workflow": "report", "status": "succeeded" if i % 5 else "failed", "created": now - 60_000 + i * 100,
         "started": now - 59_000 + i * 100, "finished": now - 59_000 + i * 100 + (i * 37) % 1000,
         "error": codec.dumps({"name": "Error", "message": f"boom {i}", "kind": "error"}) if i % 5 == 0 else None}
        for i in range(40)
    ]  # fmt: skip
    old = [{"workflow": "report", "status": "failed", "created": now - 7200_000, "started": now - 7200_000, "finished": now - 7100_000}]
    recent_ids = write_finished_runs(r, client, recent)
    write_finished_runs(r, client, old)

    (hour,) = workflow_stats(client, 3600)
    expected = expected_from_runs(r, client, recent_ids)
    assert hour.runs == 40 and hour.counts == expected["counts"] and (hour.p50_s, hour.p95_s) == (expected["p50_s"], expected["p95_s"])
    assert hour.latest_error["message"] == "boom 35"
    (day,) = workflow_stats(client, 86400)
    assert day.runs == 41 and day.counts["failed"] == hour.counts["failed"] + 1

    (part,) = workflow_stats(client, 3600, max_runs=10)  # the newest 10 by creation
    newest = expected_from_runs(r, client, recent_ids[-10:])
    assert part.partial and part.runs == 40 and part.sampled == 10
    assert part.counts == newest["counts"] and (part.p50_s, part.p95_s) == (newest["p50_s"], newest["p95_s"])


def test_windows_parse_or_fail_clearly(redis_url, prefix):
    assert [parse_window(w) for w in ("90s", "30m", "1h", "24h", "7d")] == [90, 1800, 3600, 86400, 604800]
    for bad in ("", "1", "h", "-1h", "0h", "1.5h", "1w", "400d"):
        with pytest.raises(RedflowError, match="a window is a whole number"):
            parse_window(bad)
    done = stats_cli(redis_url, prefix, "--window", "fortnight")
    assert done.returncode == 2 and "argument --window: a window is a whole number of s, m, h or d" in done.stderr
    assert stats_cli(redis_url, prefix, "--max-runs", "0").returncode == 2
    empty = stats_cli(redis_url, prefix)
    assert empty.returncode == 0 and "(no workflows)" in empty.stdout


def test_unreadable_times_and_errors_are_counted_without_failing_the_figures(client, r, registry):
    @define_workflow("odd", registry=registry)
    def odd(ctx):
        return None

    client.sync_registry(registry)
    now = client.now_ms()
    good, bad = write_finished_runs(r, client, [
        {"workflow": "odd", "status": "succeeded", "created": now - 5000, "started": now - 4000, "finished": now - 3000},
        {"workflow": "odd", "status": "succeeded", "created": now - 4000, "started": now - 3000, "finished": now - 1000},
    ])  # fmt: skip
    r.hset(client.keys.run(bad), "startedAt", "soon")
    r.hset(client.keys.run(good), "errorJson", "{not json")  # not read: the run did not fail
    (stats,) = workflow_stats(client, 3600)
    assert stats.counts["succeeded"] == 2 and stats.p50_s == stats.p95_s == 1.0 and stats.latest_error is None
    (failed,) = write_finished_runs(
        r, client, [{"workflow": "odd", "status": "failed", "created": now, "finished": now + 1, "error": "<b>"}]
    )
    (stats,) = workflow_stats(client, 3600)
    assert stats.latest_error_run == failed and stats.latest_error == {"message": "<b>"}  # shown as stored (escaped by the page)
