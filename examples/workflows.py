"""Example workflows: what `scripts/demo` runs (`redflow-gevent worker -A examples.workflows`).

They show the pieces of the docs' "Workflows" page (docs/guide/workflows.md): durable steps
with timeouts, a child workflow, events, retries with backoff,
`on_failure`, input validation, a cron trigger and cancellation.
"""

import random
import time

import gevent

from redflow import NonRetryableError, define_workflow


def user_schema(value):
    """A plain callable schema: return the (cleaned) input or raise."""
    if not isinstance(value, dict) or not isinstance(value.get("id"), int):
        raise ValueError("input needs an integer 'id'")
    return {"id": value["id"], "name": str(value.get("name", f"user-{value['id']}"))}


@define_workflow("send-welcome", queue="emails", max_attempts=3, schema=user_schema)
def send_welcome(ctx):
    user = ctx.step.run("load-user", lambda: {"id": ctx.input["id"], "name": ctx.input["name"]}, timeout=5.0)
    email = ctx.step.run_workflow("render", "render-email", {"user": user})
    ctx.step.emit_event("notify", "email.sent", {"id": user["id"]})
    return {"sent": True, "subject": email["subject"]}


@define_workflow("render-email", queue="emails")
def render_email(ctx):
    user = ctx.input["user"]
    return ctx.step.run("template", lambda: {"subject": f"Welcome, {user['name']}!"})


@define_workflow("count-sent", queue="stats", events=["email.sent"])
def count_sent(ctx):
    return {"counted": ctx.input["id"]}


def _note_failure(ctx):
    print(f"  on_failure: run {ctx.run.id} gave up after {ctx.run.attempt} attempts: {ctx.error}", flush=True)


@define_workflow("charge-card", queue="payments", max_attempts=4, on_failure=_note_failure)
def charge_card(ctx):
    def call_gateway():
        if ctx.input.get("declined"):
            raise NonRetryableError("card declined")
        if ctx.run.attempt < 2 and random.random() < 0.7:
            raise ConnectionError("gateway timeout (will retry)")
        return {"charge_id": f"ch_{ctx.run.id[-8:]}", "amount": ctx.input["amount"]}

    return ctx.step.run("gateway", call_gateway)


@define_workflow("slow-export", queue="default")
def slow_export(ctx):
    for part in range(50):
        ctx.step.run(f"part-{part}", lambda: gevent.sleep(0.1))
    return "exported"


@define_workflow("heartbeat", queue="default", cron=[{"expression": "*/2 * * * * *", "input": {"source": "cron"}}])
def heartbeat(ctx):
    return {"at": time.time(), **ctx.input}
