"""A schedule as stored (``P:schedules:def:<id>``, a redflow-gevent extension) and
:class:`Schedule` as Python reads it.

One hash per schedule holds its definition (written by ``client.schedules``)
and its state (written by the cron leader): the next tick, the last run it
started and what it skipped. Times are integer ms in the hash ("" for none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redflow.core.clock import ms_to_s
from redflow.core.errors import CorruptDataError, RedflowError
from redflow.core.models.runs import decoded
from redflow.core.schedules import ScheduleSpec, check_spec


class ScheduleField:
    """Fields of a schedule's hash."""

    WORKFLOW = "workflow"
    CRON = "cron"
    TIMEZONE = "timezone"  # "" for UTC
    INPUT_JSON = "inputJson"
    OVERLAP = "overlap"
    CATCHUP_MS = "catchupMs"
    JITTER_MS = "jitterMs"
    CREATED_AT = "createdAt"
    UPDATED_AT = "updatedAt"
    PAUSED_AT = "pausedAt"  # "" while active
    # state: written by the leader (schedule_tick.lua)
    TICK_MS = "tickMs"  # the next tick's time ("" while paused)
    DUE_MS = "dueMs"  # when it is due: its time + its jitter
    LAST_TICK_MS = "lastTickMs"  # the last tick the leader was done with
    LAST_RUN_ID = "lastRunId"  # the run the schedule started last (a tick's or a trigger's)
    LAST_RUN_AT = "lastRunAt"  # when that run was started
    LAST_ERROR = "lastError"  # why the last tick started no run ("" when it did)
    FIRED = "fired"  # ticks that started a run
    SKIPPED_LATE = "skippedLate"  # ticks missed: no leader reached them within the window
    SKIPPED_OVERLAP = "skippedOverlap"  # ticks skipped because the last run was unfinished (overlap="skip")


def definition_fields(workflow: str, spec: ScheduleSpec, input_json: str) -> dict[str, str]:
    """The definition fields of a schedule's hash."""
    return {
        ScheduleField.WORKFLOW: workflow,
        ScheduleField.CRON: spec.cron,
        ScheduleField.TIMEZONE: spec.timezone or "",
        ScheduleField.INPUT_JSON: input_json,
        ScheduleField.OVERLAP: spec.overlap,
        ScheduleField.CATCHUP_MS: str(round(spec.catchup_s * 1000)),
        ScheduleField.JITTER_MS: str(round(spec.jitter_s * 1000)),
    }


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule as ``client.schedules.list()`` returns it. Times are unix
    seconds (None: none); ``next_run_at`` is when its next tick is due (its cron
    time plus its jitter; None while paused)."""

    id: str
    workflow: str
    cron: str
    timezone: str | None
    paused: bool
    next_run_at: float | None
    last_run_id: str | None
    overlap: str
    catchup: float
    jitter: float
    input: Any
    input_json: str
    next_tick_at: float | None
    last_tick_at: float | None
    last_run_at: float | None
    last_error: str | None
    fired: int
    skipped_late: int
    skipped_overlap: int
    created_at: float | None
    updated_at: float | None
    paused_at: float | None

    @property
    def spec(self) -> ScheduleSpec:
        return ScheduleSpec(self.cron, self.timezone, self.overlap, self.catchup, self.jitter)

    @classmethod
    def from_hash(cls, schedule_id: str, fields: Mapping[str, str]) -> Schedule:
        """Read a stored schedule; :class:`CorruptDataError` naming what is wrong."""
        f = ScheduleField
        what = f"schedule {schedule_id!r}"
        try:
            spec = check_spec(
                fields.get(f.CRON), fields.get(f.TIMEZONE) or None, fields.get(f.OVERLAP),
                _ms(fields, f.CATCHUP_MS, what) / 1000.0, _ms(fields, f.JITTER_MS, what) / 1000.0,
            )  # fmt: skip
        except RedflowError as exc:
            raise CorruptDataError(f"{what} is not valid: {exc}; delete it (`redflow-gevent schedules delete`) or update it") from None
        workflow = fields.get(f.WORKFLOW) or ""
        if not workflow:
            raise CorruptDataError(f"{what} names no workflow")
        input_json = fields.get(f.INPUT_JSON) or "null"
        paused_at = _optional_ms(fields, f.PAUSED_AT, what)
        due = _optional_ms(fields, f.DUE_MS, what)
        return cls(
            id=schedule_id, workflow=workflow, cron=spec.cron, timezone=spec.timezone, paused=paused_at is not None,
            next_run_at=ms_to_s(due), last_run_id=fields.get(f.LAST_RUN_ID) or None, overlap=spec.overlap,
            catchup=spec.catchup_s, jitter=spec.jitter_s, input=decoded(input_json, f"{what} inputJson"), input_json=input_json,
            next_tick_at=ms_to_s(_optional_ms(fields, f.TICK_MS, what)), last_tick_at=ms_to_s(_optional_ms(fields, f.LAST_TICK_MS, what)),
            last_run_at=ms_to_s(_optional_ms(fields, f.LAST_RUN_AT, what)), last_error=fields.get(f.LAST_ERROR) or None,
            fired=_count(fields, f.FIRED, what), skipped_late=_count(fields, f.SKIPPED_LATE, what),
            skipped_overlap=_count(fields, f.SKIPPED_OVERLAP, what), created_at=ms_to_s(_optional_ms(fields, f.CREATED_AT, what)),
            updated_at=ms_to_s(_optional_ms(fields, f.UPDATED_AT, what)), paused_at=ms_to_s(paused_at),
        )  # fmt: skip


def _optional_ms(fields: Mapping[str, str], name: str, what: str) -> int | None:
    raw = fields.get(name) or ""
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise CorruptDataError(f"{what} field {name} is not a number of ms: {raw[:40]!r}") from None


def _ms(fields: Mapping[str, str], name: str, what: str) -> int:
    return _optional_ms(fields, name, what) or 0


def _count(fields: Mapping[str, str], name: str, what: str) -> int:
    return _ms(fields, name, what)
