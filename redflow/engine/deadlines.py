"""The worker's side of deadlines (``start_within``, ``timeout``: ``core/deadlines.py``).

Where each deadline is enforced, so that a run ends by it however it is
when the deadline passes:

- **queued** (or taken again after its worker died): the start script
  (``start.lua``) refuses a run past ``startBy`` (never started) or
  ``deadlineAt`` and replies ``expired``; the attempt fails it without
  calling the handler (:func:`expired`), ``on_failure`` first;
- **running**: the lease keeper stops the attempt when ``deadlineAt``
  passes (``engine/lease.py``: the reason ``DEADLINE``, thrown into the
  handler as a cancel is) and ``engine/decide.py`` fails the run; a retry
  that would be due after the deadline fails the run at once instead;
- **parked** (sleeping, waiting for an event or for children): its wake
  time is capped at ``deadlineAt`` (``decide``), so the promoter hands it to
  a worker then, and the start script fails it.

A run failed by a deadline is marked (``deadlineExceeded``: which one; the
stats count them) and its unfinished children are canceled *before* its
settle (``store/children.py``: ``end_for_deadline``): a worker that dies in
between leaves the run unfinished, and the next start fails it and cancels
them again. Runs without deadlines pay nothing here. No Redis here: the
inline test runner decides deadlines with these functions too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from redflow.core.deadlines import START, not_started, timed_out
from redflow.core.errors import DeadlineExceededError
from redflow.core.workflow_def import WorkflowDef
from redflow.engine.context import call_on_failure
from redflow.engine.decide import Failed, Outcome
from redflow.engine.run_info import RunInfo

#: The cancel reason of the children of a run failed by its deadline.
CHILD_CANCEL_REASON = "parent run exceeded its deadline"


def expired(workflow: WorkflowDef, input_value: Any, info: RunInfo, deadline: str, extra: Mapping[str, Any] | None = None) -> Failed:
    """The outcome of a run the start script refused as past ``deadline``
    (``start`` | ``timeout``): failed, its ``on_failure`` called."""
    error = not_started() if deadline == START else timed_out()
    call_on_failure(workflow, error, input_value, info, extra)
    return Failed(error)


def exceeded(outcome: Outcome) -> DeadlineExceededError | None:
    """The deadline error of an outcome that fails its run for a deadline, else None."""
    if isinstance(outcome, Failed) and isinstance(outcome.error, DeadlineExceededError):
        return outcome.error
    return None


def which(outcome: Outcome) -> str:
    """``start`` or ``timeout`` for an outcome that fails its run for that deadline, else ""."""
    error = exceeded(outcome)
    return error.deadline if error is not None else ""
