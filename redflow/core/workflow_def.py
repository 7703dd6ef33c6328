"""What a workflow definition is to the layers under the API, and the registry of them by name.

``redflow/registry.py`` defines workflows (``define_workflow`` makes a
:class:`~redflow.registry.Workflow`). The store (enqueue), the client, the
registry sync and the engine read them through :class:`WorkflowDef`, so
that none of them imports the registry module, whose ``Workflow.run``
starts runs through the client. No I/O.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from redflow.core.cron import TriggerDef
from redflow.core.deadlines import Deadlines
from redflow.core.errors import RedflowError
from redflow.core.flow import FlowControl
from redflow.core.retention import Retention
from redflow.core.retry import RetryPolicy
from redflow.core.singleton import Debounce, Singleton


class WorkflowDef(Protocol):
    """A defined workflow as the client, the sync and the engine read it."""

    #: The registry it was registered in (its child workflows and subscribers resolve there).
    registry: Registry | None

    @property
    def name(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def handler(self) -> Callable[[Any], Any]: ...
    @property
    def on_failure(self) -> Callable[[Any], Any] | None: ...
    @property
    def cron(self) -> Sequence[TriggerDef]: ...
    @property
    def events(self) -> Sequence[str]: ...
    @property
    def retention(self) -> Retention: ...
    @property
    def flow(self) -> FlowControl: ...
    #: ``schema=`` as the workflow keeps it (``core/input_schema.py``: synced as JSON Schema when it has one)
    @property
    def schema(self) -> Any: ...
    @property
    def retry(self) -> RetryPolicy | None: ...
    @property
    def deadlines(self) -> Deadlines: ...
    @property
    def singleton(self) -> Singleton | None: ...
    @property
    def debounce(self) -> Debounce | None: ...
    def validate(self, value: Any) -> Any: ...


class Registry:
    """Workflows by name. A worker runs the workflows of one registry."""

    def __init__(self, workflows: Iterable[WorkflowDef] = ()) -> None:
        self._workflows: dict[str, WorkflowDef] = {}
        self._lock = threading.Lock()
        for wf in workflows:
            self.register(wf)

    def register(self, workflow: WorkflowDef) -> WorkflowDef:
        with self._lock:
            existing = self._workflows.get(workflow.name)
            if existing is not None and existing.handler is not workflow.handler:
                raise RedflowError(f"workflow {workflow.name!r} is already defined in this registry")
            self._workflows[workflow.name] = workflow
        workflow.registry = self
        return workflow

    def unregister(self, name: str) -> None:
        with self._lock:
            self._workflows.pop(name, None)

    def get(self, name: str) -> WorkflowDef | None:
        return self._workflows.get(name)

    def list(self) -> builtins.list[WorkflowDef]:
        return sorted(self._workflows.values(), key=lambda wf: wf.name)

    def queues(self) -> builtins.list[str]:
        """The queues of its workflows, sorted (the worker's default queues)."""
        return sorted({wf.queue for wf in self._workflows.values()})

    def __contains__(self, name: object) -> bool:
        return name in self._workflows

    def __iter__(self) -> Iterator[WorkflowDef]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self._workflows)


_default_registry = Registry()


def get_default_registry() -> Registry:
    """The registry ``define_workflow`` uses when given none."""
    return _default_registry
