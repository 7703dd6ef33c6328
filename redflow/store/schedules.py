"""Schedules as data: ``client.schedules`` creates, changes, pauses, resumes,
triggers, deletes and lists them (the cron leader fires them: ``engine/schedules.py``).

Every change is one script (``schedule_save.lua``) on the schedule's hash and
its two indexes, checked before anything is written: a bad value, an unknown
workflow, an input its schema refuses, an id taken (create) or missing (the
others) raise and write nothing. Schedules live in keys of their own
(``Keys.schedules``), not in ``P:cron:def``: the TypeScript and asyncio
schedulers read that one and would fire them without their overlap, catch-up
and jitter rules.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Generic, TypeVar

from redflow.core.errors import RedflowError, ScheduleExistsError, ScheduleNotFoundError
from redflow.core.idempotency import schedule_trigger_idempotency_key
from redflow.core.models import Schedule, definition_fields
from redflow.core.schedules import check_id, check_spec, check_workflow, next_tick
from redflow.store.enqueue import enqueue
from redflow.store.port import Store
from redflow.store.requests import TickDone
from redflow.store.targets import Targets

#: The tag every run a schedule starts carries: ``list_runs(tags={"schedule": id})`` finds them.
SCHEDULE_TAG = "schedule"
#: Schedules read per round trip by ``list()``.
LIST_BATCH = 500

H = TypeVar("H")


class Unset(enum.Enum):
    """The value of an ``update()`` argument not given (None is a value: UTC, a null input)."""

    UNSET = 0


UNSET = Unset.UNSET


class Schedules(Generic[H]):
    """``client.schedules``: schedules as data, beside the cron triggers declared
    in code. ``handle`` makes what ``trigger`` returns from a run id (the client's
    ``RunHandle``)."""

    def __init__(self, store: Store, targets: Targets, handle: Callable[[str], H]) -> None:
        self.store = store
        self.targets = targets
        self._handle = handle

    def __repr__(self) -> str:
        return f"Schedules(prefix={self.store.prefix!r})"

    # -- writes ---------------------------------------------------------------------
    def create(
        self,
        schedule_id: str,
        *,
        workflow: str,
        cron: str,
        timezone: str | None = None,
        input: Any = None,
        overlap: str = "skip",
        catchup: float | timedelta = 0.0,
        jitter: float | timedelta = 0.0,
    ) -> Schedule:
        """Fire ``workflow`` with ``input`` at each tick of ``cron`` in ``timezone``
        (None: UTC) from the next tick on. ``overlap``: what a tick does while the
        last run is unfinished (``"skip"`` it, ``"allow"`` both, ``"cancel_running"``
        then start); ``catchup``: after downtime, missed ticks due within that many
        seconds start once each; ``jitter``: up to that many seconds of delay per tick.
        :class:`ScheduleExistsError` if the id is taken."""
        schedule_id = check_id(schedule_id)
        spec = check_spec(cron, timezone, overlap, catchup, jitter)
        fields = definition_fields(check_workflow(workflow), spec, self._input_json(workflow, input))
        tick = next_tick(schedule_id, spec, self.store.now_ms())
        reply = self._save("create", schedule_id, (tick.tick_ms, tick.due_ms), fields)
        if reply == "exists":
            raise ScheduleExistsError(schedule_id)
        return self._require(schedule_id)

    def update(
        self,
        schedule_id: str,
        *,
        workflow: str | Unset = UNSET,
        cron: str | Unset = UNSET,
        timezone: str | None | Unset = UNSET,
        input: Any = UNSET,
        overlap: str | Unset = UNSET,
        catchup: float | timedelta | Unset = UNSET,
        jitter: float | timedelta | Unset = UNSET,
    ) -> Schedule:
        """Change the fields given, keep the others. A change of ``cron``, ``timezone``
        or ``jitter`` moves the next tick to the first one from now; a paused schedule
        stays paused. :class:`ScheduleNotFoundError` if there is no such schedule."""
        given = {"workflow": workflow, "cron": cron, "timezone": timezone, "input": input,
                 "overlap": overlap, "catchup": catchup, "jitter": jitter}  # fmt: skip
        if all(value is UNSET for value in given.values()):
            raise RedflowError("update() needs at least one of: " + ", ".join(given))
        current = self._require(check_id(schedule_id))
        spec = check_spec(
            _given(cron, current.cron), _given(timezone, current.timezone), _given(overlap, current.overlap),
            _given(catchup, current.catchup), _given(jitter, current.jitter),
        )  # fmt: skip
        new_workflow = check_workflow(_given(workflow, current.workflow))
        if input is UNSET and new_workflow == current.workflow:
            input_json = current.input_json
        else:  # a new input, or the stored one checked against the new workflow
            value = input if input is not UNSET else self.store.payloads.loads(current.input_json, what=f"schedule {schedule_id!r} input")
            input_json = self._input_json(new_workflow, value)
        moved = (spec.cron, spec.timezone, spec.jitter_s) != (current.cron, current.timezone, current.jitter)
        tick = next_tick(schedule_id, spec, self.store.now_ms()) if moved else None
        fields = definition_fields(new_workflow, spec, input_json)
        self._save("update", schedule_id, None if tick is None else (tick.tick_ms, tick.due_ms), fields)
        return self._require(schedule_id)

    def pause(self, schedule_id: str) -> bool:
        """Stop firing until resumed: ``True`` if it was active, ``False`` if paused already."""
        return self._save("pause", check_id(schedule_id)) == "ok"

    def resume(self, schedule_id: str) -> bool:
        """Fire again from the first tick after now (ticks due while paused are not
        made up): ``True`` if it was paused, ``False`` if active already."""
        current = self._require(check_id(schedule_id))
        tick = next_tick(schedule_id, current.spec, self.store.now_ms())
        return self._save("resume", schedule_id, (tick.tick_ms, tick.due_ms)) == "ok"

    def delete(self, schedule_id: str) -> None:
        """Delete the schedule (the runs it started stay: they are ordinary runs)."""
        self._save("delete", check_id(schedule_id))

    def trigger(self, schedule_id: str, *, trigger_id: str | None = None) -> H:
        """Start one run of the schedule's workflow with its input now, paused or not,
        whatever its overlap policy; it becomes the schedule's last run. The same
        ``trigger_id`` never starts a second run (unless that one failed or was canceled)."""
        current = self._require(check_id(schedule_id))
        target = self.targets.resolve(current.workflow)
        value = self.store.payloads.loads(current.input_json, what=f"schedule {schedule_id!r} input")
        key = schedule_trigger_idempotency_key(schedule_id, trigger_id or uuid.uuid4().hex)
        request = self.targets.request(target, value, idempotency_key=key, tags={SCHEDULE_TAG: schedule_id})
        run_id = enqueue(self.store, request)
        self.store.scripts.schedule_tick(TickDone(schedule_id, None, run_id=run_id, run_at_ms=self.store.now_ms()))
        return self._handle(run_id)

    # -- reads -----------------------------------------------------------------------
    def get(self, schedule_id: str) -> Schedule | None:
        """The schedule, or None if there is none of that id."""
        fields = self.store.redis.hgetall(self.store.keys.schedule(check_id(schedule_id)))
        return Schedule.from_hash(schedule_id, fields) if fields else None

    def list(self) -> list[Schedule]:
        """Every schedule, the next due first, paused ones last (then by id).
        :class:`CorruptDataError` names a schedule whose hash is not one."""
        keys, redis = self.store.keys, self.store.redis
        ids = redis.zrange(keys.schedules(), 0, -1)
        found: list[Schedule] = []
        for start in range(0, len(ids), LIST_BATCH):
            pipe = self.store.pipeline()
            for schedule_id in ids[start : start + LIST_BATCH]:
                pipe.hgetall(keys.schedule(schedule_id))
            found += [Schedule.from_hash(sid, fields) for sid, fields in zip(ids[start:], pipe.execute()) if fields]
        return sorted(found, key=lambda s: (s.paused, s.next_run_at is None, s.next_run_at or 0.0, s.id))

    # -- helpers ---------------------------------------------------------------------
    def _require(self, schedule_id: str) -> Schedule:
        found = self.get(schedule_id)
        if found is None:
            raise ScheduleNotFoundError(schedule_id)
        return found

    def _input_json(self, workflow: str, value: Any) -> str:
        """The input as stored: checked against the workflow (known here or synced by a worker)."""
        return self.targets.prepare(self.targets.resolve(workflow), value)[1]

    def _save(self, action: str, schedule_id: str, tick: tuple[int, int] | None = None, fields: dict[str, str] | None = None) -> str:
        now_ms = self.store.now_ms()
        reply = self.store.scripts.schedule_save(action=action, schedule_id=schedule_id, now_ms=now_ms, tick=tick, fields=fields)
        if reply == "missing":
            raise ScheduleNotFoundError(schedule_id)
        return reply


def _given(value: Any, current: Any) -> Any:
    return current if value is UNSET else value
