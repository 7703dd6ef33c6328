"""The cross-feature model: a seeded random schedule of operations on the
public API and of faults, with the global invariants checked as it goes.

tests/chaos/test_cross_features.py says what is checked when; this module
holds the schedule (:class:`CrossFeatures`) and the ledger of what it did
(runs, events with the waits they were owed to, cancels), against which
tests/chaos/cross_checks.py judges Redis's own view.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import gevent
from invariants import server_ms

from redflow.core import codec
from redflow.core.keys import TERMINAL_STATUSES, new_id
from tests.chaos.cross_checks import Judge
from tests.chaos.cross_extras import Extras
from tests.chaos.cross_probes import Fleet, Sampler

LEASE_MS = 1000
WAIT_TIMEOUT_S = 4.0
KEYS = {"ping": ("p0", "p1", "p2"), "tick": ("t0", "t1", "t2")}

_WAITERS_LUA = """
-- KEYS: an event's waiter index; ARGV: run key prefix. Redis's time, the index,
-- and the status of each run in it, at one instant.
local time = redis.call("time")
local entries = redis.call("hgetall", KEYS[1])
local statuses = {}
for i = 1, #entries, 2 do
  table.insert(statuses, redis.call("hget", ARGV[1] .. entries[i], "status") or "")
end
return {time[1], time[2], entries, statuses}
"""


@dataclass(frozen=True)
class Entry:
    """A waiter index entry as the model read it, with its run's status then."""

    run_id: str
    step: str
    timeout_at: int | None
    match: dict[str, Any]
    status: str


@dataclass
class Emitted:
    """An event the model emitted (``ping``) or scheduled (``tick``). ``order``: pings in
    the order emitted, ticks by round (fire time); ``lo``/``hi``: Redis ms before and after
    the emission (a tick: its fire time); ``owed``: the waits whose waiter entry existed
    before it, as (run, step, timeoutAt): each must take it or an earlier one."""

    kind: str
    order: int
    eid: str
    key: str
    lo: int
    hi: int
    owed: list[tuple[str, str, int | None]]
    step: int


@dataclass
class Ledger:
    """What the model did, and what it remembers of runs a purge deleted."""

    runs: dict[str, str] = field(default_factory=dict)  # run id -> workflow
    parents: list[str] = field(default_factory=list)  # the sampler reads this list as it grows
    canceled: set[str] = field(default_factory=set)  # runs the model asked to cancel (waits may then end unresolved)
    events: list[Emitted] = field(default_factory=list)
    children: dict[str, set[str]] = field(default_factory=dict)  # parent -> its children, as ever seen
    #: waiter runs as last read: status and step records (kept when a purge deletes them)
    waiters: dict[str, tuple[str | None, dict[str, str]]] = field(default_factory=dict)

    def of(self, workflow: str) -> list[str]:
        return [run_id for run_id, name in self.runs.items() if name == workflow]


class CrossFeatures:
    """One seeded schedule: ``run()`` does ``steps`` operations, checking the safety
    invariants after each, then stops the faults and checks the rest once quiet."""

    def __init__(self, seed: int, steps: int, *, client: Any, r: Any, fleet: Fleet) -> None:
        self.seed, self.steps = seed, steps
        self.rng = random.Random(seed)
        self.timed_rng = random.Random(-seed)  # faults timed by the clock draw from their own: the schedule stays the seed's
        self.client, self.r, self.keys, self.fleet = client, r, client.keys, fleet
        self.ledger = Ledger()
        self.violations: dict[str, str] = {}
        self.step = 0
        self.tick_round, self.last_tick_ms = 0, 0
        self.faults = True  # off once the schedule is over: nothing freezes while it quiets down
        self.sampler = Sampler(r, self.keys, self.ledger.parents, lambda message: self.violate(message, message))
        self.judge = Judge(r, self.keys, self.ledger, self.sampler, self.violate)
        self.ops = [
            (6, self.enqueue_capped), (6, self.enqueue_rated), (3, self.enqueue_sleeper), (9, self.enqueue_waiter),
            (7, self.enqueue_parent), (6, self.emit_pings), (8, self.ping_into_park), (6, self.schedule_ticks),
            (8, self.cancel), (4, self.retry), (5, self.purge), (3, self.cancel_and_purge), (3, self.kill), (3, self.freeze),
            (4, self.freeze_and_cancel), (4, self.lag), (8, self.pause),
        ]  # fmt: skip
        self.extras = Extras(self)  # issue 31: signals, streams, emit_workflow, schedules (tests/chaos/cross_extras.py)
        self.ops += self.extras.ops()

    def violate(self, key: str, message: str) -> None:
        self.violations.setdefault(key, f"[seed {self.seed}, step {self.step}] {message}")

    # -- the schedule ------------------------------------------------------------------
    def run(self) -> dict[str, str]:
        """The schedule, the safety invariants after every step; then, the faults stopped
        and every run ended, the rest; then everything purged, what is left."""
        self.sampler.start()
        self.extras.create_schedule()
        try:
            weights = [weight for weight, _ in self.ops]
            for step in range(1, self.steps + 1):
                self.step = step
                op = self.rng.choices([op for _, op in self.ops], weights)[0]
                op = self.extras.leader_change if step == self.steps // 2 else op
                op()
                self.judge.safety()
                self.extras.safety()
                gevent.sleep(self.rng.uniform(0.0, 0.1))
            self.step = self.steps + 1  # what follows is judged after the schedule
            self.faults = False
            self.fleet.thaw()
            self.fleet.clock.lag_ms = 0
            self.extras.wind_down()
            self.quiesce()
        finally:
            self.sampler.stop()
        self.judge.safety()
        self.extras.safety()
        self.judge.quiet()
        self.extras.quiet()
        self.purge_everything()
        self.extras.safety()
        self.judge.unreachable(self.client.prefix)
        return self.violations

    def quiesce(self, timeout_s: float = 60.0) -> None:
        """With the faults stopped: wait until every run has ended (or the timeout), with a
        ping for every key and a tick round now and then, so that waits end sooner."""
        deadline = gevent.get_hub().loop.now() + timeout_s
        while gevent.get_hub().loop.now() < deadline:
            if not self.fleet.alive():
                self.fleet.processes.append(self.fleet.spawn())
            self.extras.nudge()
            if all(status is None or status in TERMINAL_STATUSES for status in self.judge.statuses(self.judge.all_runs()).values()):
                return
            for key in KEYS["ping"]:
                self._ping(key)
            if self.last_tick_ms < server_ms(self.r):
                self.schedule_ticks()
            gevent.sleep(0.3)

    def purge_everything(self) -> None:
        """Every run has ended: purge them all (retention's own deletion, with no wait)."""
        for _ in range(5):
            self._purge(older_than=0)
            if not self.r.zcard(self.keys.runs_created()):
                return
            gevent.sleep(0.2)

    def _run(self, workflow: str, value: Any) -> str:
        run_id = self.client.run(workflow, value).id
        self.ledger.runs[run_id] = workflow
        if workflow == "parent":
            self.ledger.parents.append(run_id)
        return run_id

    def enqueue_capped(self) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self._run("capped", {"nap": self.rng.uniform(0.05, 0.4)})

    def enqueue_rated(self) -> None:
        for _ in range(self.rng.randint(2, 6)):
            self._run("rated", {"fail": self.rng.random() < 0.3})

    def enqueue_sleeper(self) -> None:
        self._run("sleeper", {"s": self.rng.uniform(0.2, 1.2)})

    def enqueue_waiter(self) -> None:
        event = self.rng.choice(sorted(KEYS))
        value = {"event": event, "k": self.rng.choice(KEYS[event]), "n": self.rng.randint(2, 3), "timeout": WAIT_TIMEOUT_S}
        self._run("waiter", value)

    def enqueue_parent(self, prep: float | None = None) -> str:
        kids = [{"nap": self.rng.uniform(0.02, 0.3), "sleep": self.rng.choice([0, 0, 0.5])} for _ in range(self.rng.randint(2, 4))]
        prep = self.rng.uniform(0.05, 0.4) if prep is None else prep
        return self._run("parent", {"prep": prep, "kids": kids, "flaky": self.rng.random() < 0.3})

    def _waiters(self, event: str) -> tuple[int, list[Entry]]:
        """Redis's time and the entries of ``event``'s waiter index at that instant."""
        seconds, micros, flat, statuses = self.r.eval(_WAITERS_LUA, 1, self.keys.event_waiters(event), self.keys.run_prefix())
        entries = []
        for run_id, raw, status in zip(flat[::2], flat[1::2], statuses):
            entry = codec.loads(raw)
            wait = (codec.try_loads(entry["record"]) or {}).get("wait") or {}
            entries.append(Entry(run_id, entry["step"], wait.get("timeoutAt"), entry.get("match") or {}, status))
        return int(seconds) * 1000 + int(micros) // 1000, entries

    def _ping(self, key: str, snapshot: tuple[int, list[Entry]] | None = None) -> None:
        """Emit a ping for ``key``, owed to the waits whose entries the snapshot (taken now if none) holds."""
        lo, entries = snapshot or self._waiters("ping")
        payload = {"k": key, "eid": new_id("ping")}
        self.client.emit_event("ping", payload)
        order = sum(1 for e in self.ledger.events if e.kind == "ping")
        owed = [(e.run_id, e.step, e.timeout_at) for e in entries if all(payload.get(k) == v for k, v in e.match.items())]
        self.ledger.events.append(Emitted("ping", order, payload["eid"], key, lo, server_ms(self.r), owed, self.step))

    def emit_pings(self) -> None:
        """A burst for one key: each ping right after the one before, so that some land
        while a run the last one resumed is parking in its next wait."""
        key = self.rng.choice(KEYS["ping"])
        for _ in range(self.rng.randint(2, 12)):
            self._ping(key)
            gevent.sleep(self.rng.uniform(0.0, 0.003))

    def ping_into_park(self) -> None:
        """A ping, then another the moment a run it resumed has written its next waiter
        entry but is still running (its park not settled yet), sometimes with the worker
        processes frozen past their lease at that moment: the race of the park window."""
        key = self.rng.choice(KEYS["ping"])
        freeze = self.rng.random() < 0.3
        self._ping(key)
        for _ in range(300):
            now, entries = self._waiters("ping")
            if any(e.status == "running" and e.match.get("k") == key for e in entries):
                if freeze and self.fleet.thawed():
                    self.fleet.freeze(self.fleet.thawed(), self.rng.uniform(1.3, 2.0) * LEASE_MS / 1000)
                self._ping(key, (now, entries))
                return
            gevent.sleep(0)

    def schedule_ticks(self) -> None:
        """One round: a tick for every key, all due at one instant, more than a second
        ahead (every worker's scheduled-events loop, idle a second at most, then sleeps
        until that instant) and later than every earlier round; sometimes a worker is
        frozen a few ms after that instant, maybe while it delivers the round."""
        now, entries = self._waiters("tick")
        at_ms = max(self.last_tick_ms + 50, now + self.rng.randint(1100, 2000))
        self.last_tick_ms, self.tick_round = at_ms, self.tick_round + 1
        for key in KEYS["tick"]:
            payload = {"k": key, "eid": new_id("tick")}
            self.client.schedule_event("tick", payload, at=at_ms / 1000)
            owed = [(e.run_id, e.step, e.timeout_at) for e in entries if e.match.get("k") == key]
            self.ledger.events.append(Emitted("tick", self.tick_round, payload["eid"], key, at_ms, at_ms, owed, self.step))
        if self.rng.random() < 0.4 and self.faults:
            gevent.spawn_later((at_ms - now) / 1000 + self.rng.uniform(0.0, 0.004), self._freeze_one, self.timed_rng)

    def _freeze_one(self, rng: random.Random) -> None:
        thawed = self.fleet.thawed()
        if thawed and self.faults:
            self.fleet.freeze([rng.choice(thawed)], rng.uniform(1.3, 2.5) * LEASE_MS / 1000)

    def _cancel(self, run_id: str) -> None:
        self.ledger.canceled.add(run_id)
        self.client.cancel(run_id, reason=f"model step {self.step}")
        self.sampler.sample()  # a parent canceled at once is seen so before anything can purge it

    def cancel(self) -> None:
        statuses = self.judge.statuses(list(self.ledger.runs))
        live = [run_id for run_id, status in statuses.items() if status and status not in TERMINAL_STATUSES]
        parents = [run_id for run_id in live if self.ledger.runs[run_id] == "parent"]
        pool = parents if parents and self.rng.random() < 0.6 else live
        if pool:
            self._cancel(self.rng.choice(pool))

    def retry(self) -> None:
        """A failed or canceled run (not a parent: its cancel must stay settled for the cascade's check)."""
        statuses = self.judge.statuses([run_id for run_id, name in self.ledger.runs.items() if name != "parent"])
        ended = sorted(run_id for run_id, status in statuses.items() if status in ("failed", "canceled"))
        if ended:
            run_id = self.rng.choice(ended)
            self.extras.retried.add(run_id)
            self.client.retry(run_id)

    def _purge(self, older_than: float, workflow: str | None = None) -> None:
        """``client.purge``, what the checks need of the runs it may delete remembered first."""
        self.judge.remember_waiters()  # what a purged waiter run resolved stays judged
        self.extras.remember()
        self.client.purge(older_than=older_than, workflow=workflow)

    def purge(self) -> None:
        self._purge(self.rng.choice([0, 0.5, 2.0]), self.rng.choice([None, "child", "child"]))

    def cancel_and_purge(self) -> None:
        """Cancel a parent, then purge what has ended at once (the parent, if nobody held it):
        its children end after it is gone."""
        statuses = self.judge.statuses(self.ledger.parents)
        live = [run_id for run_id, status in statuses.items() if status and status not in TERMINAL_STATUSES]
        if live:
            self._cancel(self.rng.choice(live))
            self._purge(older_than=0)

    def kill(self) -> None:
        alive = self.fleet.alive()
        if alive:
            self.fleet.kill(self.rng.choice(alive))

    def freeze(self) -> None:
        thawed = self.fleet.thawed()
        if thawed and self.rng.random() < 0.3:
            self.fleet.freeze(thawed, self.rng.uniform(1.3, 2.5) * LEASE_MS / 1000)
        else:
            self._freeze_one(self.rng)

    def freeze_and_cancel(self) -> None:
        """A parent starts; while it works before starting its children, every worker process
        freezes past its lease and the parent is canceled: its worker, if frozen, wakes after
        the cancel settled elsewhere."""
        for _ in range(60):  # every worker process awake first (an earlier freeze may still hold)
            if len(self.fleet.thawed()) == len(self.fleet.alive()):
                break
            gevent.sleep(0.05)
        parent = self.enqueue_parent(prep=self.rng.uniform(0.3, 0.6))
        for _ in range(100):
            if self.judge.statuses([parent])[parent] == "running":
                break
            gevent.sleep(0.01)
        gevent.sleep(0.05)
        if self.fleet.thawed():
            self.fleet.freeze(self.fleet.thawed(), self.rng.uniform(1.5, 2.5) * LEASE_MS / 1000)
        self._cancel(parent)

    def lag(self) -> None:
        self.fleet.clock.lag_ms = self.rng.choice([0, 300, 1500])

    def pause(self) -> None:
        gevent.sleep(self.rng.uniform(0.1, 0.5))
