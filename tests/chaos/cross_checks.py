"""The judge of the cross-feature model: the global invariants, checked against Redis.

:meth:`Judge.safety` holds what can be judged at any instant (after every
step of the schedule): each check reads an atomic view of Redis (one
script) or records that never change once written. :meth:`Judge.quiet`
holds what can only be judged once the faults have stopped and every run
has ended; :meth:`Judge.unreachable` what is left once everything is purged.
Each violation names the run, the event or key, the step and the defect of
issue 28 it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from invariants import children_missing, event_payload, events_resolving_twice, leftovers

from redflow.core import codec
from redflow.core.keys import TERMINAL_STATUSES

if TYPE_CHECKING:
    from tests.chaos.cross_model import Emitted, Ledger
    from tests.chaos.cross_probes import Sampler

#: Keys that name runs but hold one entry per lane, not one per run: not a leak.
_LEAK_HINTS = {
    ":children-ended": " (issue 28 #6: a child's end re-created it)",
    ":children": " (issue 28 #2: children enqueued for a parent already gone)",
    ":signals": " (issue 31: a signal stored for a run already gone)",
    ":stream:pass:1": " (issue 31: a stream item written for a run already gone)",
}


class Judge:
    def __init__(self, r: Any, keys: Any, ledger: Ledger, sampler: Sampler, violate: Callable[[str, str], None]) -> None:
        self.r, self.keys, self.ledger, self.sampler, self.violate = r, keys, ledger, sampler, violate

    def statuses(self, run_ids: list[str]) -> dict[str, str | None]:
        pipe = self.r.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(self.keys.run(run_id), "status")
        return dict(zip(run_ids, pipe.execute()))

    def children(self, parent: str) -> list[str]:
        """The parent's children, as ever seen (a purge of the parent deletes its index)."""
        seen = self.ledger.children.setdefault(parent, set())
        seen.update(self.r.zrange(self.keys.run_children(parent), 0, -1))
        return sorted(seen)

    def all_runs(self) -> list[str]:
        return sorted({*self.ledger.runs, *(child for parent in self.ledger.parents for child in self.children(parent))})

    def remember_waiters(self) -> dict[str, tuple[str | None, dict[str, str]]]:
        """Every waiter run's status and step records, as read now or, for a run purged
        since, as last read (a purge deletes only ended runs, whose records never change)."""
        run_ids = self.ledger.of("waiter")
        pipe = self.r.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(self.keys.run(run_id), "status")
            pipe.hgetall(self.keys.run_steps(run_id))
        replies = pipe.execute()
        for run_id, status, steps in zip(run_ids, replies[::2], replies[1::2]):
            if status is not None:
                self.ledger.waiters[run_id] = (status, steps)
        return self.ledger.waiters

    # -- after every step --------------------------------------------------------------
    def safety(self) -> None:
        for message in self.sampler.breaches():
            self.violate(message, f"rate limit (issue 28 #5): {message}")
        for parent, children in children_missing(self.r, self.keys, self.ledger.parents, "kids").items():
            for child in sorted(children):
                self.violate(f"needed {child}", f"retention (issue 28 #3): child {child} of live parent {parent} was deleted "
                             "while the parent's step 'kids' still waited for it")  # fmt: skip
        steps_of = {run_id: steps for run_id, (_, steps) in self.remember_waiters().items()}
        for run_id, doubled in events_resolving_twice(steps_of).items():
            for eid, steps in doubled.items():
                self.violate(f"twice {run_id} {eid}", f"events (issue 28 #1): event {eid} resolved {len(steps)} waits of run "
                             f"{run_id} ({', '.join(steps)}); a wait takes an event emitted after it began, once")  # fmt: skip
        self._children_of_canceled(final=False)

    def _children_of_canceled(self, *, final: bool) -> None:
        """No child of a canceled parent starts after the cancel settled, its cascade included
        (``startedAt`` is never later than the start by Redis's clock); once quiet, none is unfinished."""
        for parent, canceled_ms in sorted(self.sampler.canceled_at.items()):
            children = self.children(parent)
            pipe = self.r.pipeline(transaction=False)
            for child in children:
                pipe.hmget(self.keys.run(child), ["status", "startedAt"])
            for child, (status, started_at) in zip(children, pipe.execute()):
                if started_at and int(started_at) > canceled_ms:
                    self.violate(f"started {child}", f"cancel (issue 28 #2): child {child} of parent {parent} started at Redis "
                                 f"ms {started_at} or later, after the parent's cancel had settled (the parent canceled and each "
                                 f"of its children then ended or told to stop, by Redis ms {canceled_ms})")  # fmt: skip
                if final and status is not None and status not in TERMINAL_STATUSES:
                    self.violate(f"unfinished {child}", f"cancel (issue 28 #2): child {child} of canceled parent {parent} "
                                 f"is still {status} once everything is quiet")  # fmt: skip

    # -- once quiet --------------------------------------------------------------------
    def quiet(self) -> None:
        for run_id, status in sorted(self.statuses(self.all_runs()).items()):
            if status is not None and status not in TERMINAL_STATUSES:
                self.violate(f"stuck {run_id}", f"liveness: run {run_id} ({self.ledger.runs.get(run_id, 'child')}) is still "
                             f"{status} after the faults stopped")  # fmt: skip
        self._children_of_canceled(final=True)
        self._waits_missed()
        self._rate_starts_seen()

    def _rate_starts_seen(self) -> None:
        """Every start of a rated run (one per attempt) appeared in the window, as it stays
        there a period by Redis's clock: unless the sampler looked away that long."""
        if self.sampler.longest_gap_ms >= self.sampler.period_ms:
            return
        rated = self.ledger.of("rated")
        attempts = self.r.pipeline(transaction=False)
        for run_id in rated:
            attempts.hget(self.keys.run(run_id), "attempt")
        expected = {f"{run_id}:{n}" for run_id, count in zip(rated, attempts.execute()) for n in range(1, int(count or 0) + 1)}
        for start in sorted(self.sampler.unseen(expected)):
            self.violate(f"unseen {start}", f"rate limit (issue 28 #5): start {start} never appeared in the rate window "
                         "(recorded out of it already)")  # fmt: skip

    def _waits_missed(self) -> None:
        """Each wait an event was owed to (its waiter entry existed before the event) took
        it or an earlier one; a ping's wait did not time out before the ping was emitted."""
        by_eid = {event.eid: event for event in self.ledger.events}
        waiters = self.remember_waiters()
        for event in self.ledger.events:
            for run_id, step, timeout_at in event.owed:
                status, steps = waiters.get(run_id, (None, {}))
                if run_id in self.ledger.canceled or status == "canceled":
                    continue  # a canceled wait may end unresolved
                why = self._missed(event, steps.get(step), timeout_at, by_eid)
                if why:
                    self.violate(f"missed {run_id} {step}", f"events (issue 28 #7): run {run_id} wait {step} {why}, though "
                                 f"{self._described(event)} matched it after its waiter entry existed")  # fmt: skip

    @staticmethod
    def _missed(event: Emitted, raw: str | None, timeout_at: int | None, by_eid: dict[str, Emitted]) -> str:
        if (codec.try_loads(raw) or {}).get("status") != "succeeded":
            return "never resolved"
        payload = event_payload(raw)
        if payload is None:
            late = event.kind == "ping" and (timeout_at is None or event.hi < timeout_at)
            return f"timed out at {timeout_at}" if late else ""
        taken = by_eid.get(str(payload.get("eid")))
        if taken is None:
            return f"resolved with {payload}, which nobody emitted"
        return f"took the later {taken.kind} {taken.eid}" if taken.kind == event.kind and taken.order > event.order else ""

    @staticmethod
    def _described(event: Emitted) -> str:
        when = f"emitted at Redis ms {event.lo}..{event.hi}" if event.kind == "ping" else f"due at Redis ms {event.lo}"
        return f"{event.kind} {event.eid} (key {event.key}, step {event.step}, {when})"

    # -- once everything is purged -------------------------------------------------------
    def unreachable(self, prefix: str) -> None:
        """Nothing may still name a run that is gone (but keys that expire by themselves)."""
        bounded = {self.keys.retention_cursors()}  # one position per lane, not an entry per run
        schedules = self.keys.schedule("")  # a schedule names the run it started last; deleting a run leaves it be
        for key, why in sorted(leftovers(self.r, self.keys, prefix).items()):
            if key not in bounded and not key.startswith(schedules):
                hint = next((text for suffix, text in _LEAK_HINTS.items() if key.endswith(suffix)), "")
                self.violate(f"leftover {key}", f"retention{hint}: {key} is {why} after every run was purged")
