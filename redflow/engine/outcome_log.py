"""What the worker logs as each attempt ends (on the ``redflow.worker`` logger)."""

from __future__ import annotations

import logging

from redflow.engine.attempt import Attempt
from redflow.engine.decide import Abandoned, Canceled, Failed, Outcome, Retrying, Skipped

log = logging.getLogger("redflow.worker")


def log_outcome(attempt: Attempt, outcome: Outcome) -> None:
    """One line per ended attempt: warnings for failures and runs left to others, debug for the rest."""
    extra = attempt.log_extra()
    match outcome:
        case Failed(error):
            log.warning("run %s failed: %s: %s", attempt.run_id, type(error).__name__, error, extra=extra)
        case Retrying(error, delay_ms):
            tries = attempt.info.attempt
            log.info("run %s attempt %d failed (%s); retry in %.2fs", attempt.run_id, tries, error, delay_ms / 1000, extra=extra)
        case Canceled():
            log.info("run %s canceled", attempt.run_id, extra=extra)
        case Abandoned(reason):
            log.warning("run %s left to another worker (%s)", attempt.run_id, reason, extra=extra)
        case Skipped("missing"):
            log.warning(
                "queue %r: dropped entry %s: no such run (no run hash, or one without a status)", attempt.queue, attempt.run_id, extra=extra
            )
        case _:
            log.debug("run %s %s", attempt.run_id, outcome.kind, extra=extra)
