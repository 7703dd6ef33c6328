"""Issue 31's features in the cross-feature model (tests/chaos/test_cross_features.py):
signals, output streams, ``emit_workflow`` and schedules as data, drawn in the same
seeded schedule as the other operations, under the same kills, freezes and lagging
clock, plus kills of the cron leader. Their invariants:

* **signals**: each signal ``client.signal`` accepted (True) is taken by one wait of its
  run and name at most, in the order sent, and none is taken twice; once the run has
  succeeded every accepted signal was taken; a signal to an ended or unknown run returns
  False and is stored nowhere (not in the run's buffer, never taken);
* **streams**: what a live reader (``handle.stream``) collected is what
  ``client.read_stream`` holds (a prefix of it if the run was retried after the reader
  ended, or purged while it read); each item carries the attempt that wrote it, and the
  attempts never go back; an attempt's items run in order, starting again only where an
  attempt starts (item 0) or resumes after its durable sleep (a takeover streams again:
  at least once); a succeeded run's last attempt holds every item; a gone run (purged)
  has no ``:stream:*`` or ``:signals`` key;
* **emit_workflow**: each emit step starts one run at most, across retries and
  takeovers, and exactly the one its record names once the step is recorded;
* **schedules** (every second, overlap "allow", 60 s catch-up), through kills of the cron
  leader (often right between a tick's run and the tick's advance): each tick starts one
  run at most, every run a schedule started is a tick's or a trigger's (the same trigger
  id, the same run), no tick fires outside a span in which the schedule was active, and
  every tick of a span up to where the schedule had got to (its next tick, read just
  before the span ended) started a run: none lost through a leader change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gevent
from invariants import server_ms

from redflow.core.idempotency import schedule_tick_idempotency_key
from redflow.core.keys import TERMINAL_STATUSES, enc, new_id
from redflow.core.models import ScheduleField
from tests.chaos.cross_extras_checks import ExtrasJudge
from tests.chaos.harness import leads_cron

if TYPE_CHECKING:
    from tests.chaos.cross_model import CrossFeatures

WAIT_SHAPES = (("s", "s"), ("s", "s", "s"), ("s", "o", "s"), ("o", "s", "s", "o"))


@dataclass
class Span:
    """A time a schedule was active. ``lo`` / ``lo_after``: Redis ms before / after the call
    that began it (create, resume, update); ``hi``: after the call that ended it (pause,
    update, delete); ``cursor``: its next tick, read just before that call: every tick
    before it had been handled then."""

    lo: int
    lo_after: int
    hi: int | None = None
    cursor: int | None = None


@dataclass
class ScheduleLog:
    spans: list[Span]
    triggers: dict[str, list[str]] = field(default_factory=dict)  # trigger id -> the runs it started
    runs: set[str] = field(default_factory=set)  # runs tagged with the schedule, as ever seen
    deleted: bool = False

    @property
    def active(self) -> bool:
        return not self.deleted and self.spans[-1].hi is None


@dataclass
class Live:
    """What a live reader collected, how it ended, and the run's status right after."""

    items: list[Any]
    error: str | None
    status: str | None


class Extras:
    """The operations and checks of issue 31's features; ``model`` holds the rest."""

    def __init__(self, model: CrossFeatures) -> None:
        self.m = model
        self.listeners: dict[str, tuple[str, ...]] = {}  # run -> the names of its waits, in order
        self.sent: dict[str, dict[str, list[str]]] = {}  # run -> name -> ids of the accepted signals, in order
        self.refused: dict[str, set[str]] = {}  # run -> ids of the signals it refused
        self.records: dict[str, tuple[str | None, dict[str, str]]] = {}  # listener/emitter -> status, steps as last read
        self.streamers: dict[str, dict[str, Any]] = {}  # run -> input
        self.streams: dict[str, list[Any]] = {}  # run -> its whole stream as last read
        self.readers: dict[str, gevent.Greenlet] = {}
        self.live: dict[str, Live] = {}
        self.retried: set[str] = set()  # runs the model retried
        self.emitted: dict[str, tuple[str, str]] = {}  # run -> (its emitter, the emit step)
        self.schedules: dict[str, ScheduleLog] = {}
        self.leader_kills = self.window_kills = 0  # window: between a tick's run and its advance
        self.gone: set[str] = set()  # runs seen purged

    def ops(self) -> list[tuple[int, Any]]:
        return [
            (5, self.enqueue_listener), (7, self.signal), (2, self.signal_ended), (6, self.enqueue_streamer),
            (4, self.enqueue_emitter), (4, self.schedule_change), (4, self.kill_leader),
        ]  # fmt: skip

    def summary(self) -> str:
        accepted = sum(len(sids) for by_name in self.sent.values() for sids in by_name.values())
        refused = sum(len(sids) for sids in self.refused.values())
        items = sum(len(items) for items in self.streams.values())
        ticks = sum(len(self.fired(sid)) for sid in self.schedules)
        tagged = sum(len(log.runs) for log in self.schedules.values())
        return (f"{len(self.listeners)} listeners ({accepted} signals accepted, {refused} refused), {len(self.streamers)} "
                f"streamers ({items} items), {len(self.emitted)} emitted runs, {len(self.schedules)} schedules "
                f"({ticks} ticks fired, {tagged} runs), {self.leader_kills} cron leader kills ({self.window_kills} mid-tick)")  # fmt: skip

    # -- operations ----------------------------------------------------------------------
    def enqueue_listener(self) -> None:
        """A run of several signal waits; some signals sent at once, most likely before its waits."""
        waits = self.m.rng.choice(WAIT_SHAPES)
        run_id = self.m._run("listener", {"waits": list(waits)})
        self.listeners[run_id] = waits
        for _ in range(self.m.rng.randint(0, 2)):
            self._send(run_id)

    def _open(self, run_id: str) -> list[str]:
        waits, sent = self.listeners[run_id], self.sent.get(run_id, {})
        return sorted(name for name in set(waits) if waits.count(name) > len(sent.get(name, [])))

    def _send(self, run_id: str) -> None:
        """One signal of a name the run still waits for (each wait gets one)."""
        names = self._open(run_id)
        if not names:
            return
        name, sid = self.m.rng.choice(names), new_id("sig")
        if self.m.client.signal(run_id, name, {"sid": sid}):
            self.sent.setdefault(run_id, {}).setdefault(name, []).append(sid)
            return
        status = self.m.judge.statuses([run_id])[run_id]
        if status is not None and status not in TERMINAL_STATUSES:  # nobody but the model revives a run
            self.m.violate(f"refused {sid}", f"signals: client.signal({run_id}, {name!r}) returned False while the run is {status}")
        self._refused(run_id, sid)

    def _refused(self, run_id: str, sid: str) -> None:
        self.refused.setdefault(run_id, set()).add(sid)
        if any(sid in value for value in self.m.r.hvals(self.m.keys.run_signals(run_id))):
            self.m.violate(f"stored {sid}", f"signals: signal {sid} to run {run_id} returned False but is in its buffer")

    def signal(self) -> None:
        """A few signals to a live listener that still waits for some."""
        statuses = self.m.judge.statuses(sorted(self.listeners))
        live = [run_id for run_id, status in statuses.items() if status not in TERMINAL_STATUSES and status and self._open(run_id)]
        if live:
            run_id = self.m.rng.choice(live)
            for _ in range(self.m.rng.randint(1, 3)):
                self._send(run_id)
                gevent.sleep(self.m.rng.uniform(0.0, 0.02))

    def signal_ended(self) -> None:
        """A signal to a run that has ended (or was purged): False, and stored nowhere."""
        statuses = self.m.judge.statuses(sorted(self.m.ledger.runs))
        ended = sorted(run_id for run_id, status in statuses.items() if status is None or status in TERMINAL_STATUSES)
        if not ended:
            return
        run_id, sid = self.m.rng.choice(ended), new_id("sig")
        if self.m.client.signal(run_id, "s", {"sid": sid}):
            self.m.violate(f"accepted {sid}", f"signals: client.signal to run {run_id}, {statuses[run_id] or 'purged'}, returned True")
        self._refused(run_id, sid)

    def enqueue_streamer(self) -> None:
        rng = self.m.rng
        n = rng.randint(3, 8)
        value: dict[str, Any] = {"n": n, "nap": rng.uniform(0.02, 0.15), "flaky": rng.random() < 0.3}
        if rng.random() < 0.4:
            value.update(rest_at=rng.randint(1, n - 1), rest=rng.uniform(0.2, 0.6))
        run_id = self.m._run("streamer", value)
        self.streamers[run_id] = value
        self.readers[run_id] = gevent.spawn(self._read_live, run_id)

    def _read_live(self, run_id: str) -> None:
        items, error = [], None
        try:
            for item in self.m.client.get_handle(run_id).stream():
                items.append(item)
        except Exception as exc:  # judged once quiet: a reader must end with its run
            error = repr(exc)
        self.live[run_id] = Live(items, error, self.m.judge.statuses([run_id])[run_id])

    def enqueue_emitter(self) -> None:
        rng = self.m.rng
        self.m._run("emitter", {"nap": rng.uniform(0.05, 0.4), "two": rng.random() < 0.5, "flaky": rng.random() < 0.3})

    def create_schedule(self) -> None:
        """A schedule of the stamp workflow, every second (the model creates one before its first step)."""
        sid, lo = f"m{len(self.schedules)}", server_ms(self.m.r)
        self.m.client.schedules.create(sid, workflow="stamp", cron="* * * * * *", overlap="allow", catchup=60,
                                       jitter=self.m.rng.choice([0, 0.3]))  # fmt: skip
        self.schedules[sid] = ScheduleLog([Span(lo, server_ms(self.m.r))])

    def schedule_change(self) -> None:
        """Create a schedule (two active at most), or pause, resume, update, trigger or delete one
        (``m0``, the first, is never deleted: some schedule ticks through every leader change)."""
        rng, schedules = self.m.rng, self.m.client.schedules
        active = sorted(sid for sid, log in self.schedules.items() if log.active)
        kept = sorted(sid for sid, log in self.schedules.items() if not log.deleted)
        if not kept or (len(active) < 2 and rng.random() < 0.3):
            self.create_schedule()
            return
        sid = rng.choice(kept)
        log = self.schedules[sid]
        choices = ["pause", "trigger", "trigger", "update"] if log.active else ["resume", "resume", "resume", "trigger"]
        action = rng.choice(choices + (["delete"] if sid != "m0" else []))  # mostly ticking: a paused one soon resumes
        if action == "pause":
            self._end_span(sid, lambda: schedules.pause(sid))
        elif action == "resume":
            lo = server_ms(self.m.r)
            schedules.resume(sid)
            log.spans.append(Span(lo, server_ms(self.m.r)))
        elif action == "trigger":
            trigger_id = rng.choice(["a", "b", new_id("t")])
            before = log.triggers.setdefault(trigger_id, [])
            status = self.m.judge.statuses(before[-1:]).get(before[-1]) if before else None
            run_id = schedules.trigger(sid, trigger_id=trigger_id).id
            if status not in (None, "failed", "canceled") and run_id != before[-1]:  # a run gone or ended so: a new one
                self.m.violate(f"trigger {sid} {trigger_id}", f"schedules: trigger {trigger_id!r} of {sid} started run {run_id}, "
                               f"though it had started {before[-1]}, {status}")  # fmt: skip
            if run_id not in before:
                before.append(run_id)
        elif action == "update":  # a new jitter: the next tick is the first from now
            lo = server_ms(self.m.r)
            self._end_span(sid, lambda: schedules.update(sid, jitter=rng.choice([0, 0.2, 0.4])))
            log.spans.append(Span(lo, server_ms(self.m.r)))
        elif action == "delete":
            if log.active:
                self._end_span(sid, lambda: schedules.delete(sid))
            else:
                schedules.delete(sid)
            log.deleted = True

    def _cursor(self, sid: str) -> int | None:
        tick = self.m.r.hget(self.m.keys.schedule(sid), ScheduleField.TICK_MS)
        return int(tick) if tick else None

    def _end_span(self, sid: str, call: Any) -> None:
        span = self.schedules[sid].spans[-1]
        span.cursor = self._cursor(sid)
        call()
        span.hi = server_ms(self.m.r)

    def leader_change(self) -> None:
        """The step in the middle of every schedule: ``m0`` ticking (resumed if paused), its
        leader SIGKILLed between a tick's run and its advance (if one comes within 3 s)."""
        if not self.schedules["m0"].active:
            lo = server_ms(self.m.r)
            self.m.client.schedules.resume("m0")
            self.schedules["m0"].spans.append(Span(lo, server_ms(self.m.r)))
        self.kill_leader(mid_tick=True)

    def kill_leader(self, mid_tick: bool = False) -> None:
        """SIGKILL the worker that leads the cron: often right between a tick's run and its advance."""
        leaders = [worker for worker in self.m.fleet.alive() if leads_cron(worker)]
        if not leaders:
            return
        active = [sid for sid, log in self.schedules.items() if log.active]
        if active and (mid_tick or self.m.rng.random() < 0.6):
            for _ in range(300 if mid_tick else 150):  # a schedule just resumed: its leader may be idle a second first
                if any(self._inside_the_window(sid) for sid in active):
                    self.window_kills += 1
                    break
                gevent.sleep(0.01)
        self.leader_kills += 1
        self.m.fleet.kill(leaders[0])

    def _inside_the_window(self, sid: str) -> bool:
        """A tick has its run and has not moved on yet."""
        tick = self._cursor(sid)
        return tick is not None and bool(self.m.r.exists(self._tick_key(sid, tick)))

    def _tick_key(self, sid: str, tick_ms: int) -> str:
        return self.m.keys.idempotency("stamp", schedule_tick_idempotency_key(sid, tick_ms))

    # -- the model's hooks ---------------------------------------------------------------
    def remember(self) -> None:
        """Before a purge: what the checks need of runs it may delete (records and streams
        never change once their run ended), and the runs the model did not start itself."""
        statuses = self.m.judge.statuses(sorted({*self.listeners, *self.m.ledger.of("emitter"), *self.streamers}))
        for run_id, status in statuses.items():
            if status is None:
                self.gone.add(run_id)
            elif run_id in self.streamers:
                self.streams[run_id] = self._whole_stream(run_id)
            else:
                self.records[run_id] = (status, self.m.r.hgetall(self.m.keys.run_steps(run_id)))
        for run in self._all_runs(workflow="emitted"):
            self.emitted[run.id] = (run.input["parent"], run.input["step"])
            self.m.ledger.runs.setdefault(run.id, "emitted")
        for sid, log in self.schedules.items():
            log.runs.update(run.id for run in self._all_runs(tags={"schedule": sid}))
            for run_id in log.runs:
                self.m.ledger.runs.setdefault(run_id, "stamp")

    def _all_runs(self, **filters: Any) -> list[Any]:
        runs, cursor = [], None
        while True:
            page = self.m.client.list_runs(limit=1000, cursor=cursor, **filters)
            runs.extend(page)
            if page.cursor is None:
                return runs
            cursor = page.cursor

    def _whole_stream(self, run_id: str) -> list[Any]:
        items: list[Any] = []
        while page := self.m.client.read_stream(run_id, after=items[-1].id if items else None, limit=1000):
            items.extend(page)
        return items

    def wind_down(self) -> None:
        """The schedule is over: the active schedules paused (so that everything can end)."""
        for sid, log in sorted(self.schedules.items()):
            if log.active:
                self._end_span(sid, lambda: self.m.client.schedules.pause(sid))  # noqa: B023 (called at once)

    def nudge(self) -> None:
        """While quieting down: every signal a live listener still waits for, and the runs
        the model did not start itself into the ledger (so that they are waited for too)."""
        statuses = self.m.judge.statuses(sorted(self.listeners))
        for run_id, status in statuses.items():
            if status and status not in TERMINAL_STATUSES:
                for _ in range(len(self._open(run_id))):
                    self._send(run_id)
        self.remember()

    def safety(self) -> None:
        """After every step: a purged run of these features leaves no key of its stream or signals."""
        runs = sorted({*self.listeners, *self.streamers})
        for run_id, status in self.m.judge.statuses(runs).items():
            if status is None:
                self.gone.add(run_id)
        keys, gone = self.m.keys, sorted(self.gone)
        pipe = self.m.r.pipeline(transaction=False)
        for run_id in gone:
            pipe.exists(keys.run_stream(run_id), keys.run_stream_signal(run_id), keys.run_stream_cursors(run_id), keys.run_signals(run_id))
        for run_id, left in zip(gone, pipe.execute()):
            if left:
                self.m.violate(f"left {run_id}", f"retention: run {run_id} was purged but {left} of its stream/signal keys remain")

    def quiet(self) -> None:
        """Once quiet: the checks of tests/chaos/cross_extras_checks.py."""
        self.remember()
        ExtrasJudge(self).quiet()

    def fired(self, sid: str) -> dict[int, str]:
        """tick ms -> the run its key names (the keys outlive the test: 60 s + an hour)."""
        tail = re.compile(re.escape(schedule_tick_idempotency_key(sid, 0)[:-1]) + r"(\d+)$")
        keys = self.m.r.scan_iter(self.m.keys.idempotency("stamp", "")[: -len(enc(""))] + "*", count=1000)
        return {int(m.group(1)): self.m.r.get(key) for key in keys if (m := tail.search(key))}
