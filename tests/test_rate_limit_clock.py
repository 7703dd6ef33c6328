"""A rate limit counts starts by Redis's clock, whatever the worker's clock says.

Invariant (docs/flow-control.md): never more than N starts in any window of
S seconds, by Redis's clock. A worker sends its estimate of Redis's time
with each start; one frozen between preparing the call and sending it (a
SIGSTOP, a GC pause, a starved CPU) sends an estimate that lags by the
freeze. The rate limit must not use it: a start recorded in the past leaves
the window early and lets another start in, and a run held by the limit is
woken when that early entry leaves.

The lag is made exact here: the "frozen" worker's call carries a ``now``
that lags Redis's clock by the freeze. What Redis admitted is judged from
Redis's own view: each start lies between Redis's times read just before and
just after its call, and the window's entries must hold those times.
"""

from __future__ import annotations

import pytest
from invariants import rate_breaches, server_ms

from redflow import RateLimit, Registry, define_workflow
from redflow.core.keys import new_id
from redflow.core.models import RunField

LIMIT, PERIOD_MS = 5, 1000
LEASE_MS = 60_000


@pytest.fixture
def registry() -> Registry:
    registry = Registry()

    @define_workflow("rated", registry=registry, rate_limit=RateLimit(limit=LIMIT, period=PERIOD_MS / 1000))
    def rated(ctx):
        return None

    return registry


def take(client, r, *, lag_ms: int) -> tuple[str, str, tuple[int, int]]:
    """One claim-and-start by a worker whose ``now`` lags Redis's clock by ``lag_ms``:
    (run id, "started", or "" when the run claimed was held; Redis's time before and after the call)."""
    before = server_ms(r)
    claim = client.scripts.take_run(queue="default", token=new_id("lease"), lease_ms=LEASE_MS, now_ms=before - lag_ms)
    after = server_ms(r)
    if claim is None:  # the claim found only a held run (held runs are put aside, not returned)
        return "", "", (before, after)
    return claim.run_id, claim.start.kind, (before, after)


def admitted(client, r, runs: list[tuple[str, str, tuple[int, int]]]) -> dict[str, tuple[int, int]]:
    """The starts Redis admitted, with their bounds; and each window entry must hold a time within them."""
    window = dict(r.zrange(client.keys.rate_window("rated", None), 0, -1, withscores=True))
    starts = {f"{run_id}:1": bounds for run_id, kind, bounds in runs if kind == "started"}
    for member, (before, after) in starts.items():
        if member in window:
            assert before <= window[member] <= after, f"start {member} was recorded at {window[member]:.0f}, outside ({before}, {after}]"
    return starts


def test_a_start_sent_after_a_freeze_counts_when_redis_admits_it_so_no_window_holds_more_than_the_limit(client, r, registry):
    client.run_many("rated", [None] * (LIMIT + 1))
    # The frozen worker prepared its start 1.5 s ago (more than the period) and sends it now.
    taken = [take(client, r, lag_ms=PERIOD_MS + 500)]
    taken += [take(client, r, lag_ms=0) for _ in range(LIMIT)]
    starts = admitted(client, r, taken)
    assert rate_breaches(starts, LIMIT, PERIOD_MS) == []
    assert [kind for _, kind, _ in taken] == ["started"] * LIMIT + [""]


def test_a_run_the_rate_limit_holds_is_due_only_when_the_window_has_room_by_redis_clock(client, r, registry):
    held_id = client.run_many("rated", [None] * (LIMIT + 1))[-1].id
    # The first start was prepared 0.4 s before it was sent: its entry must stay a full period.
    first = take(client, r, lag_ms=400)
    taken = [first, *(take(client, r, lag_ms=0) for _ in range(LIMIT))]
    assert [kind for _, kind, _ in taken] == ["started"] * LIMIT + [""]
    assert r.hget(client.keys.run(held_id), RunField.HELD_BY) == "rate"
    due = int(r.hget(client.keys.run(held_id), RunField.AVAILABLE_AT))
    assert r.zscore(client.keys.queue_scheduled("default"), held_id) == due
    # Woken at ``due``, it may start: the first start must have left the window by then.
    earliest_first_start = first[2][0]
    assert due >= earliest_first_start + PERIOD_MS, f"held until {due}, {earliest_first_start + PERIOD_MS - due} ms early"
    assert rate_breaches({**admitted(client, r, taken), f"{held_id}:1": (due, due)}, LIMIT, PERIOD_MS) == []
