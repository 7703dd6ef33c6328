"""Cancel, retry or signal one run, and say what happened in words a person can
read (``runs cancel|retry|signal`` and the dashboard's buttons)."""

from __future__ import annotations

import dataclasses
from typing import Any

from redflow.client import RedflowClient


@dataclasses.dataclass(frozen=True, slots=True)
class ActionResult:
    """What a cancel or retry did, in words a person can read."""

    run_id: str
    ok: bool
    status: str | None
    message: str


def cancel_run(client: RedflowClient, run_id: str, reason: str | None = None) -> ActionResult:
    """``client.cancel``, then say what happened (canceled now, or its worker told to stop it)."""
    done = client.cancel(run_id, reason=reason)
    run = client.get_run(run_id)
    status = run.status if run else None
    if run is None:
        return ActionResult(run_id, False, None, f"no run {run_id}")
    if not done:
        return ActionResult(run_id, False, status, f"not canceled: the run already ended ({status})")
    if status == "canceled":
        return ActionResult(run_id, True, status, "canceled")
    return ActionResult(run_id, True, status, "cancel requested: its worker stops it")


def retry_run(client: RedflowClient, run_id: str) -> ActionResult:
    """``client.retry``, then say what happened."""
    done = client.retry(run_id)
    run = client.get_run(run_id)
    if run is None:
        return ActionResult(run_id, False, None, f"no run {run_id}")
    if not done:
        why = (
            "a live worker holds it" if run.status == "running"
            else "another unfinished run holds its singleton key" if run.singleton and run.status in ("failed", "canceled")
            else "only failed or canceled runs, or running runs no worker holds, retry"
        )  # fmt: skip
        return ActionResult(run_id, False, run.status, f"not retried: the run is {run.status} ({why})")
    return ActionResult(run_id, True, run.status, "queued again; its succeeded steps will replay")


def signal_run(client: RedflowClient, run_id: str, name: str, payload: Any = None) -> ActionResult:
    """``client.signal``, then say what happened (kept for the run, or why not)."""
    if client.signal(run_id, name, payload):
        return ActionResult(run_id, True, None, f"signal {name!r} kept for the run: its next wait_for_signal({name!r}) takes it")
    run = client.get_run(run_id)
    if run is None:
        return ActionResult(run_id, False, None, f"no run {run_id}")
    return ActionResult(run_id, False, run.status, f"not sent: the run already ended ({run.status}); nothing was stored")
