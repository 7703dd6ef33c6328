"""What an enqueue knows of a workflow, and the enqueue requests made from it.

A workflow is started by object or by name. By name, it is looked up in the
client's registry, then the default one, then in the metadata a worker
synced to Redis (``P:workflow:<name>``: its queue, attempt budget and input
schema), read at most once per ``meta_ttl_s``. The input is validated (a
locally known workflow's schema, else the JSON Schema a worker synced, when
it says clients may check it: ``core/input_schema.py``) and encoded here
(over the store's blob threshold, as a ``@blob:`` reference and its blob),
and so are the limits its workflow puts on the run, so that the request the
enqueue pipeline gets (``store/enqueue.py``) is complete. With an app name
(``core/interop.py``), queues are scoped as the asyncio ``redflow`` package
scopes them: by the app in the workflow's metadata, else the client's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redflow.core.app_scope import scope_queue
from redflow.core.deadlines import NO_DEADLINES, Deadlines
from redflow.core.errors import RedflowError, UnknownWorkflowError
from redflow.core.flow import check_priority, limits_spec
from redflow.core.idempotency import step_workflows_idempotency_key
from redflow.core.input_schema import schema_from_metadata
from redflow.core.interop import NONE, Interop
from redflow.core.json_schema import JsonSchema, json_form
from redflow.core.keys import Keys
from redflow.core.models import RunField, WorkflowField, max_attempts_of
from redflow.core.singleton import DEBOUNCE, Debounce, KeyClaim, Singleton, delayed_debounce, key_value, of_metadata
from redflow.core.workflow_def import Registry, WorkflowDef, get_default_registry
from redflow.store.payloads import Payloads
from redflow.store.requests import IDEMPOTENCY_TTL_S, EnqueueRequest
from redflow.store.workflow_lookup import unknown_workflow

#: How long a workflow's synced metadata (queue, max attempts, input schema) is
#: reused before it is read again, so that an enqueue by name is one round trip.
#: Safe: the metadata only chooses where a new run waits and its attempt
#: budget, both fixed at enqueue, and what input is refused before the run
#: exists (the worker checks it again at every attempt); a deploy that changes
#: them is seen within this time, which only widens the window a deploy has
#: anyway (runs enqueued just before it keep the old values). An unknown name
#: is never cached.
WORKFLOW_META_TTL_S = 5.0
#: How long a ``run_workflows`` child's idempotency key lives, as ``client.run``'s.
CHILD_IDEMPOTENCY_TTL_S = IDEMPOTENCY_TTL_S


@dataclass(frozen=True, slots=True)
class Target:
    """What an enqueue needs to know about a workflow (``workflow``: None when known
    by its metadata only; then ``schema``: the synced schema clients may check, if any).
    ``queue`` is scoped by ``app`` (the metadata's, else the client's), and so is a queue an enqueue names."""

    name: str
    queue: str
    max_attempts: int
    workflow: WorkflowDef | None
    schema: JsonSchema | None = None
    deadlines: Deadlines = NO_DEADLINES
    app: str | None = None
    #: its singleton or debounce (``core/singleton.py``), from the workflow or its metadata
    one_run: Singleton | Debounce | None = None


class Targets:
    """Workflows resolved for enqueueing, by one client (see the module docstring)."""

    def __init__(self, redis: Any, keys: Keys, payloads: Payloads, registry: Registry | None = None, interop: Interop = NONE) -> None:
        self.redis = redis
        self.keys = keys
        self.payloads = payloads
        self.registry = registry
        self.interop = interop
        self.meta_ttl_s = WORKFLOW_META_TTL_S
        self._synced: dict[str, tuple[float, Target]] = {}  # name -> (read at, monotonic s; target)

    def forget(self) -> None:
        """Read synced metadata afresh (this client just stored it)."""
        self._synced.clear()

    def resolve(self, workflow: WorkflowDef | str) -> Target:
        """Name, queue and attempts of a workflow: the local registries first, else its synced metadata."""
        if not isinstance(workflow, str):
            return self._of(workflow)
        if not workflow:
            raise UnknownWorkflowError("")
        local = self._local(workflow)
        if local is not None:
            return self._of(local)
        return self._synced_target(workflow)

    def _of(self, workflow: WorkflowDef) -> Target:
        """A workflow known here: its queue scoped by this client's app name, if any."""
        queue = self.interop.queue(workflow.queue)
        one_run = workflow.singleton or workflow.debounce
        return Target(
            workflow.name, queue, workflow.max_attempts, workflow, deadlines=workflow.deadlines, app=self.interop.app, one_run=one_run
        )

    def _local(self, name: str) -> WorkflowDef | None:
        if self.registry is not None and name in self.registry:
            return self.registry.get(name)
        return get_default_registry().get(name)

    def _local_names(self) -> list[str]:
        registries = [get_default_registry()] if self.registry is None else [self.registry, get_default_registry()]
        return [wf.name for registry in registries for wf in registry]

    def _synced_target(self, name: str) -> Target:
        """A workflow known only from its synced metadata, read at most once per ``meta_ttl_s``."""
        now_s = time.monotonic()
        cached = self._synced.get(name)
        if cached is not None and now_s - cached[0] < self.meta_ttl_s:
            return cached[1]
        read = [WorkflowField.QUEUE, WorkflowField.MAX_ATTEMPTS, WorkflowField.START_WITHIN_MS, WorkflowField.TIMEOUT_MS]
        read += [WorkflowField.INPUT_SCHEMA_JSON, WorkflowField.INPUT_SCHEMA_CHECK, WorkflowField.APP, WorkflowField.ONE_RUN_JSON]
        queue, max_attempts, start_within_ms, timeout_ms, schema_json, schema_check, app, one_run = self.redis.hmget(
            self.keys.workflow(name), read
        )
        if not queue:
            self._synced.pop(name, None)
            raise unknown_workflow(self.redis, self.keys, name, self._local_names())
        fields = {RunField.MAX_ATTEMPTS: max_attempts} if max_attempts else {}
        what = f"workflow {name}"
        deadlines = Deadlines.of_metadata(start_within_ms, timeout_ms, what=what)
        schema = schema_from_metadata(schema_json, schema_check)
        app = app or self.interop.app  # the app the metadata names wins, as in the asyncio package
        queue = scope_queue(app, queue) if app else queue
        target = Target(name, queue, max_attempts_of(fields, what=what), None, schema, deadlines, app, of_metadata(one_run, name))
        self._synced[name] = (now_s, target)
        return target

    def prepare(self, target: Target, input: Any) -> tuple[Any, str]:
        """The validated input and its JSON text (by name: checked against the synced schema)."""
        if target.workflow is not None:
            input = target.workflow.validate(input)
        input_json = self.payloads.input_json(input, target.name)
        if target.schema is not None:
            source = f"the JSON Schema synced for {target.name!r}, checked before the run is created"
            target.schema.check(json_form(input), source=source)
        return input, input_json

    def request(
        self,
        target: Target,
        input: Any,
        *,
        queue: str | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        limited: bool = True,
        **options: Any,
    ) -> EnqueueRequest:
        """The request that starts a run of ``target`` with ``input`` (validated
        and encoded here); ``options``: more fields of :class:`EnqueueRequest`.
        ``limited``: compute the limits its workflow puts on it (else its first
        claim does, as for a run another client enqueued)."""
        value, input_json = self.prepare(target, input)
        if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
            raise RedflowError("max_attempts must be an int >= 1")
        key = options.get("idempotency_key")
        if key is not None and (not isinstance(key, str) or not key):
            raise RedflowError("idempotency_key must be a non-empty string")
        queue = (scope_queue(target.app, queue) if target.app else queue) if queue else target.queue
        if not options.get("notify_parent"):  # a run_workflows child is its parent's own: never another run
            options["claim"] = self._claim(target, queue, value, options.get("available_at_ms", 0))
        stored = self.payloads.stored(input_json)
        return EnqueueRequest(
            target.name,
            queue,
            stored.value,
            max_attempts or target.max_attempts,
            priority=check_priority(priority),
            limits_json=self._limits_json(target, queue, value) if limited else "",
            deadlines=target.deadlines,
            input_blob=stored.blob,
            mark_parent=self.interop.mark_parent,
            **options,
        )

    def _claim(self, target: Target, queue: str, value: Any, available_at_ms: int) -> KeyClaim | None:
        """The run's singleton key or debounce window (``core/singleton.py``), None for neither."""
        policy = target.one_run
        if policy is None:
            return None
        if isinstance(policy, Singleton):
            key = key_value(policy.key, value, workflow=target.name, what="singleton")
            return KeyClaim(policy.on_conflict, self.keys.singleton(target.name, key, queue))
        debounce = policy
        if available_at_ms:
            raise delayed_debounce(target.name)
        key = key_value(debounce.key, value, workflow=target.name, what="debounce")
        return KeyClaim(DEBOUNCE, self.keys.debounce(target.name, key, queue), debounce.period_ms, debounce.max_wait_ms)

    def _limits_json(self, target: Target, queue: str, value: Any) -> str:
        """The limits the workflow puts on a run (computed here when the workflow is
        known locally; else the worker computes them when it first claims the run)."""
        workflow = target.workflow
        if workflow is None or not workflow.flow.active:
            return ""
        return limits_spec(self.keys, target.name, queue, workflow.flow, value)

    def children(
        self, workflow: WorkflowDef | str, inputs: Sequence[Any], *, parent_run_id: str, parent_queue: str, step: str
    ) -> list[EnqueueRequest]:
        """The children of ``step.run_workflows`` (one per input): idempotent per
        parent, step and index, each telling its parent when it ends. Their limits
        are computed when they are first claimed: a key function failing on a
        child's input fails that child, not the parent's step."""
        target = self.resolve(workflow)
        return [
            self.request(
                target,
                value,
                idempotency_key=step_workflows_idempotency_key(parent_run_id, step, target.name, index),
                idempotency_ttl_s=CHILD_IDEMPOTENCY_TTL_S,
                parent_run_id=parent_run_id,
                notify_parent=parent_queue,
                limited=False,
            )
            for index, value in enumerate(inputs)
        ]
