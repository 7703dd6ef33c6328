"""Cron triggers at runtime: pause, resume, trigger now (``redflow-gevent cron ...``,
:mod:`redflow.ops.cli.cron`, and the dashboard).

A paused trigger keeps its definition (``P:cron:def``) and leaves the
schedule (``P:cron:next``); ``P:cron:paused`` says since when. Nothing
fires it while paused: the scheduler skips a paused id even if something put
it back on the schedule, and a ``sync_registry`` (a worker starting, a new
deploy) keeps a paused trigger off the schedule. Resuming puts it back at
its next due time from now: the fires it missed are not made up in a burst.
Triggering starts one run now with the trigger's input, paused or not.
Other clients' schedulers (TypeScript, asyncio) do not know the paused key.

The stored ids are hashes (DATA_MODEL.md, "Cron ids"); :func:`resolve` lets
an operator name a trigger by its workflow instead, when that has only one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from redflow.client import RedflowClient
from redflow.core import codec, cron
from redflow.core.errors import RedflowError
from redflow.core.idempotency import cron_trigger_idempotency_key
from redflow.core.models import CronDef
from redflow.ops.views.crons import cron_entries


@dataclass(frozen=True, slots=True)
class CronChange:
    """What pause / resume / trigger did, in words."""

    cron_id: str
    ok: bool
    message: str
    run_id: str | None = None


def _definition(client: RedflowClient, cron_id: str) -> CronDef:
    raw = client.redis.hget(client.keys.cron_def(), cron_id)
    if raw is None:
        raise RedflowError(f"no cron trigger {cron_id!r} (see `redflow-gevent cron list`)")
    return CronDef.from_json(str(raw))


def resolve(client: RedflowClient, target: str) -> str:
    """The cron id ``target`` names: a stored id (as ``cron list`` shows it), or the
    name of a workflow that has exactly one cron trigger."""
    entries = cron_entries(client)
    if any(entry.id == target for entry in entries):
        return target
    of_workflow = [entry for entry in entries if entry.workflow == target and entry.error is None]
    if len(of_workflow) == 1:
        return of_workflow[0].id
    if of_workflow:
        ids = ", ".join(f"{entry.id} ({entry.expression})" for entry in of_workflow)
        raise RedflowError(f"workflow {target!r} has {len(of_workflow)} cron triggers: {ids}; name one by its id")
    raise RedflowError(f"no cron trigger {target!r}: no such cron id, nor a workflow with a cron trigger (see `redflow-gevent cron list`)")


def paused_ids(client: RedflowClient) -> dict[str, float]:
    """Paused cron ids -> unix time they were paused."""
    return {cron_id: int(at) / 1000.0 for cron_id, at in client.redis.hgetall(client.keys.cron_paused()).items() if str(at).isdigit()}


def pause(client: RedflowClient, cron_id: str) -> CronChange:
    """Stop firing ``cron_id`` until it is resumed; its definition stays."""
    _definition(client, cron_id)
    keys = client.keys
    added, _ = (
        client.redis.pipeline(transaction=False)
        .hsetnx(keys.cron_paused(), cron_id, client.now_ms())
        .zrem(keys.cron_next(), cron_id)
        .execute()
    )
    return CronChange(cron_id, bool(added), "paused" if added else "already paused")


def resume(client: RedflowClient, cron_id: str) -> CronChange:
    """Fire ``cron_id`` again from its next due time (no catch-up of missed fires)."""
    definition = _definition(client, cron_id)
    now = client.now_ms()
    next_at = cron.next_fire_ms(definition.expression, definition.timezone, now)
    keys = client.keys
    removed, _ = (
        client.redis.pipeline(transaction=False)
        .hdel(keys.cron_paused(), cron_id)
        .zadd(keys.cron_next(), {cron_id: next_at}, nx=True)
        .execute()
    )
    if not removed:
        return CronChange(cron_id, False, "not paused")
    return CronChange(cron_id, True, f"resumed; next fire at {next_at / 1000.0:.0f} (unix s)")


def trigger(client: RedflowClient, cron_id: str, trigger_id: str | None = None) -> CronChange:
    """Start one run of the trigger's workflow now, with its input; the same
    ``trigger_id`` never starts a second run."""
    definition = _definition(client, cron_id)
    run_input = codec.loads(definition.input_json, what=f"cron {cron_id} inputJson")
    key = cron_trigger_idempotency_key(cron_id, trigger_id or uuid.uuid4().hex)
    handle = client.run(definition.workflow, run_input, queue=definition.queue, idempotency_key=key)
    return CronChange(cron_id, True, f"started run {handle.id} of {definition.workflow}", handle.id)
