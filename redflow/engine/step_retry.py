"""Step retries: ``ctx.step.run(name, fn, retry=RetryPolicy(...))``.

A step with a retry policy calls ``fn`` again in the same attempt when it
raises, after the policy's wait, up to the policy's ``max_attempts`` tries
(as DBOS's step retries and Temporal's activity retry policy do; here the
waits are held inside the attempt, which keeps its slot and lease). Every
failed try is recorded (the step's record holds the latest error and, under
``tries``, which try wrote it), and a later success replaces it. The policy's
rules are the run's (``core/retry.py``): ``no_retry_on`` / ``retry_on``,
``NonRetryableError`` never, ``RetryAfterError`` sets the wait. The last
try's error leaves the step, to the run's own retry policy; a retried run
starts the step's tries afresh.

A wait that would end past the run's deadline is not waited: the error
leaves the step at once (the run then fails with ``DeadlineExceededError``).
A cancel, the deadline or a lost lease interrupts a wait as it interrupts
the step itself. Steps without ``retry=`` pay nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redflow.core.errors import RedflowError
from redflow.core.retry import RetryPolicy, retry_delay_ms
from redflow.engine.step_host import Recorder, StepHost


def check(retry: Any) -> None:
    """A step's ``retry=`` option: None or a RetryPolicy (a clear error otherwise)."""
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise RedflowError(f"a step's retry must be a RetryPolicy or None, got {retry!r}")


def run_with_retries(
    steps: Recorder, host: StepHost, name: str, seq: int, fn: Callable[..., Any], timeout: float | None, policy: RetryPolicy
) -> Any:
    """Run step ``name`` (its ``seq``) with up to ``policy.max_attempts`` tries."""
    tries = 1
    while True:
        try:
            return steps.execute(name, seq, fn, timeout, tries=tries)
        except Exception as exc:
            delay_ms = _wait_before_next_try(exc, tries, policy, host)
            if delay_ms is None:
                raise
        host.pause(delay_ms)
        tries += 1


def _wait_before_next_try(error: Exception, tries: int, policy: RetryPolicy, host: StepHost) -> int | None:
    """How long to wait before the next try, or None when there is none (no
    tries left, an error the policy does not retry, or a deadline in the way)."""
    if tries >= policy.max_attempts:
        return None
    delay_ms = retry_delay_ms(error, tries, policy)
    deadline_ms = host.info.deadline_ms
    if delay_ms is None or (deadline_ms is not None and host.now_ms() + delay_ms >= deadline_ms):
        return None
    return delay_ms
