"""How fast filtered run listings answer at a million runs (issue 18).

    .venv/bin/python bench/run_search.py [-n 1000000] [--limit 50] [--json out.json]

It starts a private redis-server, writes ``-n`` runs straight in the
DATA_MODEL.md layout with pipelined HSET / ZADD (plus this extension's tag
and failed / canceled indexes, as enqueue and the settle write them), then
times ``client.list_runs`` for every combination of a workflow, a status
and tags, including filters that match nothing. The data has the shapes
that make listings slow: a workflow whose 5% of runs all failed (so
"succeeded" matches none of them), a customer with 10% of all runs, four
tenants of 20% each, a backlog of queued runs.

For each combination it prints the first page's time (median of
``--repeat``), how many runs it held, how many index entries it examined,
and, when the page was short with a cursor (bounded work: see
``redflow/store/run_search.py``), how long the walk to the last page takes.
Figures depend on the machine and its load: they are reported, not asserted.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import itertools  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402

from redflow import create_client  # noqa: E402
from redflow.core.tags import tags_json  # noqa: E402
from redflow.testing import RedisServer  # noqa: E402

WORKFLOWS = [("orders", 0.70), ("emails", 0.20), ("reports", 0.05), ("always-fails", 0.05)]
STATUSES = [("succeeded", 0.90), ("failed", 0.05), ("canceled", 0.02), ("queued", 0.015), ("scheduled", 0.01), ("running", 0.005)]
START_MS = 1_767_225_600_000  # 2026-01-01


def pick(rnd: random.Random, weighted: list[tuple[str, float]]) -> str:
    x, total = rnd.random(), 0.0
    for name, weight in weighted:
        total += weight
        if x < total:
            return name
    return weighted[-1][0]


def tags_for(rnd: random.Random) -> dict[str, str]:
    tags: dict[str, str] = {}
    if rnd.random() < 0.8:
        tags["tenant"] = f"t{rnd.randint(1, 4)}"
    roll = rnd.random()
    if roll < 0.10:
        tags["customer"] = "c0"
    elif roll < 0.85:
        tags["customer"] = f"c{rnd.randint(1, 999)}"
    return tags


def build(client: Any, runs: int, seed: int) -> None:
    """``runs`` runs in the data-model layout, one createdAt ms apart, pipelined."""
    rnd, keys, redis = random.Random(seed), client.keys, client.redis
    pipe = redis.pipeline(transaction=False)
    for n in range(runs):
        run_id = f"run_{rnd.getrandbits(128):032x}"
        workflow = pick(rnd, WORKFLOWS)
        status = "failed" if workflow == "always-fails" else pick(rnd, STATUSES)
        tags = tags_for(rnd)
        created = START_MS + n
        fields = {
            "workflow": workflow, "queue": "default", "status": status, "inputJson": f'{{"n":{n}}}', "attempt": "1",
            "maxAttempts": "3", "createdAt": created, "cancelRequestedAt": "", "cancelReason": "",
        }  # fmt: skip
        if tags:
            fields["tagsJson"] = tags_json(tags)
        if status in ("succeeded", "failed", "canceled"):
            fields["finishedAt"] = created + 50
            if status == "succeeded":
                fields["outputJson"] = "null"
            else:
                fields["errorJson"] = '{"name":"Error","message":"boom","kind":"error"}'
        pipe.hset(keys.run(run_id), mapping=fields)
        pipe.zadd(keys.runs_created(), {run_id: created})
        pipe.zadd(keys.workflow_runs(workflow), {run_id: created})
        entered = created + 50 if status in ("succeeded", "failed", "canceled") else created
        pipe.zadd(keys.runs_status(status), {run_id: entered})
        for key in keys.tag_index_keys(workflow, tags):
            pipe.zadd(key, {run_id: created})
        if status in ("failed", "canceled"):
            for key in keys.terminal_index_keys(workflow, tags)[0 if status == "failed" else 1 :: 2]:
                pipe.zadd(key, {run_id: entered})
        if len(pipe) >= 20_000:
            pipe.execute()
    pipe.execute()


def timed(fn: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    value = fn()
    return (time.perf_counter() - began) * 1000.0, value


def measure(client: Any, workflow: str | None, status: str | None, tags: dict[str, str] | None, limit: int, repeat: int) -> dict[str, Any]:
    times, page = [], None
    for _ in range(repeat):
        ms, page = timed(lambda: client.list_runs(workflow=workflow, status=status, tags=tags, limit=limit))
        times.append(ms)
    assert page is not None
    row: dict[str, Any] = {
        "workflow": workflow, "status": status, "tags": tags, "first_page_ms": statistics.median(times),
        "runs": len(page), "examined": page.examined, "more": page.cursor is not None,
    }  # fmt: skip
    if page.cursor is not None and len(page) < limit:  # a short page: how long the whole walk takes
        pages, found, cursor, slowest = 1, len(page), page.cursor, 0.0
        began = time.perf_counter()
        while cursor is not None and found < limit:
            ms, nxt = timed(lambda after=cursor: client.list_runs(workflow=workflow, status=status, tags=tags, limit=limit, cursor=after))
            pages, found, cursor, slowest = pages + 1, found + len(nxt), nxt.cursor, max(slowest, ms)
        row.update(walk_pages=pages, walk_ms=(time.perf_counter() - began) * 1000.0, walk_slowest_page_ms=slowest, walk_found=found)
    return row


WORKFLOWS_ASKED = [None, "orders", "reports", "always-fails", "missing"]
STATUSES_ASKED = [None, "succeeded", "failed", "canceled", "queued", "scheduled", "running"]
TAGS_ASKED = [None, {"customer": "c0"}, {"customer": "c17"}, {"tenant": "t1"}, {"customer": "c0", "tenant": "t2"}, {"customer": "none"}]


def report(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'workflow':<13} {'status':<10} {'tags':<30} {'1st page ms':>11} {'runs':>5} {'examined':>8} more  walk to a full page or the end"
    )
    for row in rows:
        walk = (
            f"{row['walk_pages']} pages, {row['walk_ms']:.0f} ms (slowest page {row['walk_slowest_page_ms']:.1f})"
            if "walk_ms" in row
            else ""
        )
        tags = ",".join(f"{k}={v}" for k, v in (row["tags"] or {}).items()) or "-"
        print(f"{row['workflow'] or '-':<13} {row['status'] or '-':<10} {tags:<30} {row['first_page_ms']:>11.1f} {row['runs']:>5} "
              f"{row['examined']:>8} {'yes' if row['more'] else 'no':<4}  {walk}")  # fmt: skip
    worst = max(rows, key=lambda row: row["first_page_ms"])
    over = [row for row in rows if row["first_page_ms"] > 50.0]
    print(f"\n{len(rows)} combinations; slowest first page {worst['first_page_ms']:.1f} ms "
          f"({worst['workflow']}, {worst['status']}, {worst['tags']}); over 50 ms: {len(over)}")  # fmt: skip
    walks = [row for row in rows if "walk_ms" in row]
    if walks:
        w = max(walks, key=lambda row: row["walk_ms"])
        print(f"short first pages: {len(walks)}; longest walk to a full page or the end: {w['walk_ms']:.0f} ms in "
              f"{w['walk_pages']} pages ({w['workflow']}, {w['status']}, {w['tags']})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=1_000_000)
    parser.add_argument("--limit", type=int, default=50, help="page size (the dashboard's default: 50)")
    parser.add_argument("--repeat", type=int, default=3, help="timings per combination; the median is reported")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--json", help="save every row as JSON here")
    parser.add_argument("--redis-url", help="use this Redis (default: a private redis-server); with --reuse, data built earlier")
    parser.add_argument("--reuse", action="store_true", help="with --redis-url: query the runs an earlier run built there")
    args = parser.parse_args()
    with contextlib.ExitStack() as scope:
        url = args.redis_url or scope.enter_context(RedisServer()).url
        client = create_client(url, prefix="bench-search")
        if not (args.reuse and client.redis.zcard(client.keys.runs_created())):
            client.redis.eval("for _, k in ipairs(redis.call('keys', ARGV[1])) do redis.call('unlink', k) end", 0, "bench-search:*")
            began = time.perf_counter()
            build(client, args.runs, args.seed)
            print(f"built {args.runs:,} runs in {time.perf_counter() - began:.1f}s", flush=True)
        print(f"{client.redis.zcard(client.keys.runs_created()):,} runs; Redis uses {client.redis.info('memory')['used_memory_human']}")
        rows = [
            measure(client, w, s, t, args.limit, args.repeat) for w, s, t in itertools.product(WORKFLOWS_ASKED, STATUSES_ASKED, TAGS_ASKED)
        ]
        client.close()
    report(rows)
    if args.json:
        with open(args.json, "wb") as out:
            out.write(orjson.dumps({"runs": args.runs, "limit": args.limit, "rows": rows}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
