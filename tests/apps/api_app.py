"""The workflow of the HTTP API's page (docs/operations/http-api.md shows it),
run by tests/test_http_api.py."""

from redflow import Registry, define_workflow

registry = Registry()

#: {"user": <int>}, as a JSON Schema: a worker syncs it, so a dashboard without this code checks it too.
WELCOME_INPUT = {"type": "object", "properties": {"user": {"type": "integer"}}, "required": ["user"]}


@define_workflow("send-welcome", schema=WELCOME_INPUT, events=["user.created"], registry=registry)
def send_welcome(ctx):
    return {"sent_to": ctx.input["user"]}


@define_workflow("review", registry=registry)
def review(ctx):
    decision = ctx.step.wait_for_signal("approve", timeout=86400)  # a day, then None
    return {"doc": ctx.input["doc"], "approved_by": decision["by"] if decision else None}
