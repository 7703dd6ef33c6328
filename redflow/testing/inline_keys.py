"""Singleton keys and debounce windows of the inline test runner (``redflow/testing/inline.py``),
decided as ``enqueue_run.lua`` decides them, on the runner's clock.

A key counts as held while its run is unfinished, and a window as open while
its run is still scheduled and never started, as in Redis; a "replace" cancels
the key's run (and its children) before the new run is made."""

from __future__ import annotations

from typing import Any

from redflow.core.errors import CanceledError
from redflow.core.singleton import REPLACE, REPLACED_REASON, SKIP, delayed_debounce, key_value
from redflow.core.workflow_def import WorkflowDef
from redflow.testing.inline_runs import UNFINISHED, InlineRun


class InlineKeys:
    """Per (workflow, key): the run holding a singleton key, or the run a debounce window names."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], InlineRun] = {}

    @staticmethod
    def key_of(wf: WorkflowDef, value: Any) -> str | None:
        """The run's singleton or debounce key (None: the workflow has neither)."""
        if wf.singleton is not None:
            return key_value(wf.singleton.key, value, workflow=wf.name, what="singleton")
        if wf.debounce is not None:
            return key_value(wf.debounce.key, value, workflow=wf.name, what="debounce")
        return None

    def existing(self, wf: WorkflowDef, key: str, input: Any, now_ms: int, *, delayed: bool) -> InlineRun | None:
        """The run this call goes to instead of a new one (a singleton's "skip", a debounce
        window's run, moved on and given this ``input``); None: make a new run (a "replace"
        canceled the key's run first)."""
        held = self._runs.get((wf.name, key))
        if wf.debounce is not None:
            if delayed:
                raise delayed_debounce(wf.name)
            if held is None or held.status != "scheduled" or held.attempt or held.parked is not None or held.due_ms is None:
                return None
            due_ms = now_ms + wf.debounce.period_ms
            if wf.debounce.max_wait_ms:
                due_ms = min(due_ms, held.created_ms + wf.debounce.max_wait_ms)
            held.input, held.due_ms, held.collapsed_calls = input, due_ms, held.collapsed_calls + 1
            if held.start_by_ms is not None:  # start_within counts from when it is due
                held.start_by_ms = due_ms + wf.deadlines.start_within_ms
            return held
        if held is None or held.status not in UNFINISHED or wf.singleton is None:
            return None
        if wf.singleton.on_conflict == SKIP:
            held.skipped_calls += 1
            return held
        assert wf.singleton.on_conflict == REPLACE
        held.status, held.error, held.parked, held.due_ms = "canceled", CanceledError(REPLACED_REASON), None, None
        held.cancel_children(REPLACED_REASON)
        return None

    def hold(self, wf: WorkflowDef, key: str, run: InlineRun) -> int:
        """``run`` holds the key (or opens the window); a debounced run's delay in ms (else 0)."""
        self._runs[(wf.name, key)] = run
        return wf.debounce.period_ms if wf.debounce is not None else 0
