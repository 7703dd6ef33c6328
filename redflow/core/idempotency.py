"""The idempotency keys redflow derives for the runs it starts itself (DATA_MODEL.md).

A child run, an event's runs, a cron fire: each gets a key made of what
starts it, so that a retried parent, a repeated emit or a change of cron
leader starts none twice. (The Redis key an idempotency key lives under is
``Keys.idempotency``.)
"""

from __future__ import annotations

from redflow.core.keys import enc


def step_workflow_idempotency_key(parent_run_id: str, step_name: str, child_workflow: str) -> str:
    """Default idempotency key of ``step.run_workflow`` (same as the seed)."""
    return f"stepwf:{enc(parent_run_id)}:{enc(step_name)}:{enc(child_workflow)}"


def step_workflows_idempotency_key(parent_run_id: str, step_name: str, child_workflow: str, index: int) -> str:
    """Idempotency key of child ``index`` of ``step.run_workflows``: the key of
    ``run_workflow`` with the input's index, so a retried parent starts none twice."""
    return f"{step_workflow_idempotency_key(parent_run_id, step_name, child_workflow)}:{index}"


def step_event_idempotency_key(parent_run_id: str, step_name: str, event: str) -> str:
    """Default idempotency key of ``step.emit_event`` / ``step.schedule_event``."""
    return f"stepev:{enc(parent_run_id)}:{enc(step_name)}:{enc(event)}"


def event_run_idempotency_key(event: str, key: str) -> str:
    """Idempotency key of the run an event starts for one subscriber.

    The idempotency key itself is already scoped by workflow; scoping by
    event name too keeps ``emit_event(..., idempotency_key="k")`` apart from
    ``client.run(..., idempotency_key="k")`` of the same workflow.
    """
    return f"event:{enc(event)}:{enc(key)}"


def cron_fire_idempotency_key(cron_id: str, fire_ms: int) -> str:
    """Idempotency key of the run one cron fire starts: one run per fire time,
    even when leadership changes hands mid-fire."""
    return f"cron:{enc(cron_id)}:{fire_ms}"


def cron_trigger_idempotency_key(cron_id: str, trigger_id: str) -> str:
    """Idempotency key of the run ``cron trigger`` starts by hand: one run per trigger call id."""
    return f"cron-trigger:{enc(cron_id)}:{enc(trigger_id)}"


def schedule_tick_idempotency_key(schedule_id: str, tick_ms: int) -> str:
    """Idempotency key of the run one tick of a schedule starts: one run per
    schedule and tick time, whoever leads and however often the tick is retried."""
    return f"schedule:{enc(schedule_id)}:{tick_ms}"


def schedule_trigger_idempotency_key(schedule_id: str, trigger_id: str) -> str:
    """Idempotency key of the run ``schedules.trigger`` starts: one run per trigger call id."""
    return f"schedule-trigger:{enc(schedule_id)}:{enc(trigger_id)}"
