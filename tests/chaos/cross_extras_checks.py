"""The checks of issue 31's features once the cross-feature model is quiet (every run
ended, the faults stopped): tests/chaos/cross_extras.py says what each holds and keeps
the ledger they judge, against what Redis holds."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from invariants import event_payload

from redflow.core import codec

if TYPE_CHECKING:
    from tests.chaos.cross_extras import Extras

#: A schedule's first tick is the first after the client's estimate of Redis's clock, which may
#: be off by a few ms: a span's bounds are judged this much wider (fired) or narrower (expected).
SLACK_MS = 100


class ExtrasJudge:
    def __init__(self, extras: Extras) -> None:
        self.x, self.m = extras, extras.m

    def quiet(self) -> None:
        self._signals()
        self._streams()
        self._emits()
        self._schedules()

    def _signals(self) -> None:
        taken_anywhere: Counter[str] = Counter()
        refused = {sid for sids in self.x.refused.values() for sid in sids}
        for run_id, waits in sorted(self.x.listeners.items()):
            status, steps = self.x.records.get(run_id, (None, {}))
            for name in sorted(set(waits)):
                taken = []
                for k in range(1, waits.count(name) + 1):
                    payload = event_payload(steps.get(f"signal:{name}" if k == 1 else f"signal:{name}#{k}"))
                    if payload is None:
                        break
                    taken.append(str(payload.get("sid")))
                taken_anywhere.update(taken)
                sent = self.x.sent.get(run_id, {}).get(name, [])
                if taken != sent[: len(taken)] or (status == "succeeded" and taken != sent):
                    self.m.violate(f"signals {run_id} {name}", f"signals: run {run_id} ({status}) took {taken} of name {name!r}, "
                                   f"but was sent {sent} (each accepted signal to one wait, in the order sent)")  # fmt: skip
        for sid, count in sorted(taken_anywhere.items()):
            if count > 1 or sid in refused:
                self.m.violate(f"taken {sid}", f"signals: signal {sid} was taken by {count} wait(s)"
                               f"{', though client.signal returned False' if sid in refused else ''}")  # fmt: skip

    def _streams(self) -> None:
        for run_id in sorted(self.x.streamers):
            self.x.readers[run_id].join(timeout=10)
            live, whole = self.x.live.get(run_id), self.x.streams.get(run_id, [])
            if live is None:
                self.m.violate(f"reader {run_id}", f"streams: the live reader of run {run_id} has not ended, though the run has")
                continue
            self._stream_order(run_id, whole)
            seen, full = [(i.id, i.value, i.attempt) for i in live.items], [(i.id, i.value, i.attempt) for i in whole]
            exact = live.error is None and live.status is not None and run_id not in self.x.retried and run_id not in self.x.gone
            common = min(len(seen), len(full))  # a run purged since: its stream as last read before the purge
            if seen[:common] != full[:common] or (exact and seen != full):
                self.m.violate(f"live {run_id}", f"streams: the live reader of run {run_id} collected {len(seen)} items "
                               f"({live.error or 'ended'}, the run then {live.status}) that are not "
                               f"{'the' if exact else 'a prefix of the'} {len(full)} of read_stream")  # fmt: skip

    def _stream_order(self, run_id: str, items: list[Any]) -> None:
        value, status = self.x.streamers[run_id], self.m.judge.statuses([run_id])[run_id]
        starts = {0, value.get("rest_at", 0)}
        previous: Any = None
        for item in items:
            i, attempt = item.value["i"], item.attempt
            if item.value["attempt"] != attempt:
                self.m.violate(f"attempt {run_id}", f"streams: item {item.id} of run {run_id} carries attempt {attempt}, "
                               f"written by attempt {item.value['attempt']}")  # fmt: skip
            if previous is None or attempt != previous.attempt:  # an attempt begins with its first item, after the earlier ones
                fine = i == 0 and (previous is None or attempt > previous.attempt)
            else:  # the next item, or a takeover's from where the attempt began or resumed
                fine = i == previous.value["i"] + 1 or (i in starts and i <= previous.value["i"])
            if not fine:
                self.m.violate(f"order {run_id}", f"streams: item {item.id} of run {run_id} ({item.value}, attempt {attempt}) "
                               f"after {previous and (previous.value, previous.attempt)}: out of order")  # fmt: skip
            previous = item
        last = [item.value["i"] for item in items if previous is not None and item.attempt == previous.attempt]
        if status == "succeeded" and set(last) != set(range(value["n"])):
            self.m.violate(f"items {run_id}", f"streams: succeeded run {run_id}'s last attempt streamed {last} of {value['n']} items")

    def _emits(self) -> None:
        started: dict[tuple[str, str], list[str]] = {}
        for run_id, origin in sorted(self.x.emitted.items()):
            started.setdefault(origin, []).append(run_id)
        for (parent, step), runs in sorted(started.items()):
            if len(runs) > 1:
                self.m.violate(f"emitted {parent} {step}", f"emit_workflow: step {step} of run {parent} started {runs}")
        for parent in self.m.ledger.of("emitter"):
            status, steps = self.x.records.get(parent, (None, {}))
            for step in ("e1", "e2"):
                record = codec.try_loads(steps.get(step) or "null") or {}
                if record.get("status") != "succeeded":
                    continue
                recorded = codec.loads(record["outputJson"])
                if started.get((parent, step), [recorded]) != [recorded]:  # none seen: started and purged between two looks
                    self.m.violate(f"emitted {parent} {step}", f"emit_workflow: step {step} of run {parent} ({status}) "
                                   f"recorded {recorded}, but started {started.get((parent, step), [])}")  # fmt: skip

    def _schedules(self) -> None:
        for sid, log in sorted(self.x.schedules.items()):
            fired = self.x.fired(sid)
            outside = [t for t in fired if t % 1000 or not any(s.lo - SLACK_MS < t <= (s.hi or t) + SLACK_MS for s in log.spans)]
            expected = {t for s in log.spans if s.cursor for t in range(((s.lo_after + SLACK_MS) // 1000 + 1) * 1000, s.cursor, 1000)}
            known = {*fired.values(), *(run for runs in log.triggers.values() for run in runs)}
            problems = {
                "ticks fired outside its active spans": sorted(outside),
                "ticks lost": sorted(expected - set(fired)),
                "runs named by two ticks": sorted(run for run, n in Counter(fired.values()).items() if n > 1),
                "runs no tick or trigger started (a tick fired twice)": sorted(log.runs - known),
            }
            for what, found in problems.items():
                if found:
                    spans = [(s.lo, s.hi, s.cursor) for s in log.spans]
                    self.m.violate(f"{what} {sid}", f"schedules: {sid}: {what}: {found[:10]} (spans {spans})")
