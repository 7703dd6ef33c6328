"""Registry sync: workflow metadata and trigger definitions into Redis.

Workers call it at start so that clients elsewhere (TypeScript, asyncio,
another process) can start runs by name, and so that the cron scheduler and
``emit_event`` see the triggers. Triggers a workflow no longer declares are
removed; workflows other registries synced are left alone (many workers
with different registries share one Redis). With an app name
(``core/interop.py``) the metadata says so (``app``), and its queue and its
triggers' queues are scoped by it, as the asyncio package's sync writes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redflow.core import codec, cron
from redflow.core.errors import RedflowError
from redflow.core.input_schema import synced_schema
from redflow.core.models import (
    EventDef,
    WorkflowField,
    cron_def_json,
    cron_triggers_json,
    event_def_json,
    event_triggers_json,
    retention_json,
)
from redflow.core.singleton import metadata_json
from redflow.core.workflow_def import Registry, WorkflowDef
from redflow.store.port import Store

if TYPE_CHECKING:
    from redis.client import Pipeline


def _trigger_ids(wf: WorkflowDef) -> tuple[list[str], list[str]]:
    cron_ids = [cron.cron_trigger_id(wf.name, t) for t in wf.cron]
    event_ids = [cron.event_trigger_id(wf.name, e) for e in wf.events]
    for kind, ids in (("cron", cron_ids), ("event", event_ids)):
        if len(set(ids)) != len(ids):
            raise RedflowError(f"workflow {wf.name!r} declares the same {kind} trigger twice; give them distinct ids")
    return cron_ids, event_ids


def _stored_ids(raw: str | None) -> list[str]:
    ids = codec.try_loads(raw)
    return [i for i in ids if isinstance(i, str) and i] if isinstance(ids, list) else []


def sync_registry(store: Store, registry: Registry) -> None:
    keys, redis = store.keys, store.redis
    workflows = registry.list()
    if not workflows:
        return
    planned = {wf.name: _trigger_ids(wf) for wf in workflows}

    read = redis.pipeline(transaction=False)
    for wf in workflows:
        read.hmget(keys.workflow(wf.name), [WorkflowField.CRON_IDS_JSON, WorkflowField.EVENT_IDS_JSON])
        read.hmget(keys.cron_def(), planned[wf.name][0] or ["-"])
        read.hmget(keys.cron_paused(), planned[wf.name][0] or ["-"])
    replies = iter(read.execute())

    now_ms, app = store.now_ms(), store.interop.app
    write = redis.pipeline(transaction=False)
    for wf in workflows:
        queue = store.interop.queue(wf.queue)
        prev_cron_raw, prev_event_raw = next(replies)
        prev_defs = next(replies)
        paused = {cron_id for cron_id, at in zip(planned[wf.name][0], next(replies)) if at is not None}
        cron_ids, event_ids = planned[wf.name]
        _sync_crons(store, write, wf, queue, cron_ids, _stored_ids(prev_cron_raw), prev_defs, paused, now_ms)
        _sync_events(store, write, wf, queue, event_ids, _stored_ids(prev_event_raw))
        write.sadd(keys.workflows(), wf.name)
        _sync_limits(write, keys.workflow(wf.name), wf)
        _sync_input_schema(write, keys.workflow(wf.name), wf)
        _sync_policies(write, keys.workflow(wf.name), wf)
        write.hset(
            keys.workflow(wf.name),
            mapping={
                WorkflowField.NAME: wf.name,
                WorkflowField.QUEUE: queue,
                WorkflowField.MAX_ATTEMPTS: str(wf.max_attempts),
                WorkflowField.UPDATED_AT: str(now_ms),
                WorkflowField.CRON_JSON: cron_triggers_json(wf.cron),
                WorkflowField.CRON_IDS_JSON: codec.dumps(cron_ids),
                WorkflowField.EVENT_JSON: event_triggers_json(wf.events),
                WorkflowField.EVENT_IDS_JSON: codec.dumps(event_ids),
                WorkflowField.RETENTION_JSON: retention_json(wf.retention),
                **({WorkflowField.APP: app} if app is not None else {}),
            },
        )
        if app is None:  # an app a worker of this workflow named before would scope the queue its clients use
            write.hdel(keys.workflow(wf.name), WorkflowField.APP)
    write.execute()


def _sync_limits(pipe: Pipeline, key: str, wf: WorkflowDef) -> None:
    """The workflow-wide limit as the asyncio package spells it (``maxConcurrency``),
    and what views show of the limits; a workflow without them drops both."""
    fields: dict[Any, Any] = {}  # redis-py types mapping keys invariantly
    if wf.flow.active:
        fields[WorkflowField.LIMITS_JSON] = codec.dumps(wf.flow.summary())
    if wf.flow.workflow_limit is not None:
        fields[WorkflowField.MAX_CONCURRENCY] = str(wf.flow.workflow_limit)
    _set_or_drop(pipe, key, fields, (WorkflowField.LIMITS_JSON, WorkflowField.MAX_CONCURRENCY))


def _sync_input_schema(pipe: Pipeline, key: str, wf: WorkflowDef) -> None:
    """The input's JSON Schema and how clients may check it by name
    (``core/input_schema.py``); a schema a deploy removed is removed here."""
    synced = synced_schema(wf.schema)
    fields: dict[Any, Any] = {}
    if synced is not None:
        fields[WorkflowField.INPUT_SCHEMA_JSON] = synced.json
        if synced.check is not None:
            fields[WorkflowField.INPUT_SCHEMA_CHECK] = synced.check
    _set_or_drop(pipe, key, fields, (WorkflowField.INPUT_SCHEMA_JSON, WorkflowField.INPUT_SCHEMA_CHECK))


def _set_or_drop(pipe: Pipeline, key: str, fields: dict[Any, Any], names: tuple[str, ...]) -> None:
    """Write ``fields`` and delete the rest of ``names`` (what a deploy no longer
    declares), deleting first: a reader in between sees less, never an old field
    beside a new one (an old ``inputSchemaCheck`` beside a new ``inputSchemaJson``)."""
    stale = [name for name in names if name not in fields]
    if stale:
        pipe.hdel(key, *stale)
    if fields:
        pipe.hset(key, mapping=fields)


def _sync_policies(pipe: Pipeline, key: str, wf: WorkflowDef) -> None:
    """A retry policy other than the default (for the views), the deadlines, singleton and
    debounce (which a client enqueueing the workflow by name applies); absent ones are dropped."""
    fields: dict[Any, Any] = dict(wf.deadlines.metadata_fields())
    if wf.retry is not None:
        fields[WorkflowField.RETRY_JSON] = codec.dumps(wf.retry.summary())
    one_run = metadata_json(wf.singleton, wf.debounce)
    if one_run is not None:
        fields[WorkflowField.ONE_RUN_JSON] = one_run
    known = (WorkflowField.RETRY_JSON, WorkflowField.START_WITHIN_MS, WorkflowField.TIMEOUT_MS, WorkflowField.ONE_RUN_JSON)
    stale = [name for name in known if name not in fields]
    if fields:
        pipe.hset(key, mapping=fields)
    if stale:
        pipe.hdel(key, *stale)


def _sync_crons(
    store: Store,
    pipe: Pipeline,
    wf: WorkflowDef,
    queue: str,
    cron_ids: list[str],
    prev_ids: list[str],
    prev_defs: list[str | None],
    paused: set[str],
    now_ms: int,
) -> None:
    keys = store.keys
    stale = [i for i in prev_ids if i not in set(cron_ids)]
    if stale:
        pipe.hdel(keys.cron_def(), *stale)
        pipe.zrem(keys.cron_next(), *stale)
        pipe.hdel(keys.cron_paused(), *stale)
    for cron_id, trigger, prev_def in zip(cron_ids, wf.cron, prev_defs):
        definition = cron_def_json(cron_id, wf.name, queue, trigger.expression, trigger.timezone, codec.dumps(trigger.run_input))
        pipe.hset(keys.cron_def(), cron_id, definition)
        if cron_id in paused:  # paused by an operator: a deploy must not resume it (cron resume does)
            continue
        next_at = cron.next_fire_ms(trigger.expression, trigger.timezone, now_ms)
        # An unchanged trigger keeps its schedule (restarts must not reset it).
        pipe.zadd(keys.cron_next(), {cron_id: next_at}, nx=prev_def == definition)


def _sync_events(store: Store, pipe: Pipeline, wf: WorkflowDef, queue: str, event_ids: list[str], prev_ids: list[str]) -> None:
    keys, redis = store.keys, store.redis
    stale = [i for i in prev_ids if i not in set(event_ids)]
    if stale:
        for raw in redis.hmget(keys.event_def(), stale):
            if raw:
                try:
                    pipe.srem(keys.event_index(EventDef.from_json(raw).event), *stale)
                except RedflowError:
                    pass  # a corrupt stale definition: deleting it below is all that is left to do
        pipe.hdel(keys.event_def(), *stale)
    for event_id, event in zip(event_ids, wf.events):
        pipe.hset(keys.event_def(), event_id, event_def_json(event_id, event, wf.name, queue))
        pipe.sadd(keys.event_index(event), event_id)
