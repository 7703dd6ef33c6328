"""What redflow stores, as Python sees it: the one place (with the Lua scripts)
that spells the camelCase field names of DATA_MODEL.md.

- :mod:`.runs`: the run hash (``RunField``), a workflow's metadata
  (``WorkflowField``), a trigger's definition (``TriggerField``) and
  :class:`Run`;
- :mod:`.steps`: step records (``StepField``), :class:`Step`, the durable
  wait a step is parked in, event waiter entries, scheduled events;
- :mod:`.records`: retention, cron and event trigger definitions, worker records;
- :mod:`.schedules`: schedules as data (``ScheduleField``) and :class:`Schedule`.

Stored times are integer ms; the objects here carry float unix seconds.
"""

from redflow.core.models.records import (
    LOST_AFTER_BEATS,
    RUNNING_NAMED,
    CronDef,
    EventDef,
    WorkerRecord,
    cron_def_json,
    cron_triggers_json,
    event_def_json,
    event_triggers_json,
    retention_from_json,
    retention_json,
)
from redflow.core.models.runs import (
    PAYLOAD_FIELDS,
    Run,
    RunField,
    TriggerField,
    Unreadable,
    WorkflowField,
    decoded,
    int_field,
    max_attempts_of,
    payload,
    unreadable_error,
)
from redflow.core.models.schedules import Schedule, ScheduleField, definition_fields
from redflow.core.models.steps import (
    ARRAY_RECORDS,
    OBJECT_RECORDS,
    STEP_FAILED,
    STEP_RUNNING,
    STEP_SUCCEEDED,
    STEP_UNREADABLE,
    WAIT_CHILDREN,
    WAIT_EVENT,
    WAIT_SIGNAL,
    WAIT_SLEEP,
    EventWaiter,
    Step,
    StepField,
    StepForm,
    Wait,
    form_of,
    json_equal,
    scheduled_event_json,
    scheduled_event_of,
    step_failed_json,
    step_record,
    step_running_json,
    step_seq,
    step_succeeded_around,
    step_succeeded_json,
    step_waiting_json,
)

__all__ = [
    "ARRAY_RECORDS",
    "OBJECT_RECORDS",
    "StepForm",
    "form_of",
    "PAYLOAD_FIELDS",
    "payload",
    "step_record",
    "CronDef",
    "EventDef",
    "EventWaiter",
    "LOST_AFTER_BEATS",
    "RUNNING_NAMED",
    "Run",
    "RunField",
    "STEP_FAILED",
    "STEP_RUNNING",
    "STEP_SUCCEEDED",
    "STEP_UNREADABLE",
    "Schedule",
    "ScheduleField",
    "Step",
    "StepField",
    "TriggerField",
    "Unreadable",
    "WAIT_CHILDREN",
    "WAIT_EVENT",
    "WAIT_SIGNAL",
    "WAIT_SLEEP",
    "Wait",
    "WorkerRecord",
    "WorkflowField",
    "cron_def_json",
    "cron_triggers_json",
    "decoded",
    "definition_fields",
    "event_def_json",
    "event_triggers_json",
    "int_field",
    "json_equal",
    "max_attempts_of",
    "retention_from_json",
    "retention_json",
    "scheduled_event_json",
    "scheduled_event_of",
    "step_failed_json",
    "step_running_json",
    "step_seq",
    "step_succeeded_around",
    "step_succeeded_json",
    "step_waiting_json",
    "unreadable_error",
]
