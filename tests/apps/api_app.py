"""The workflow of the HTTP API's page (docs/operations/http-api.md shows it),
run by tests/test_http_api.py."""

from typing import Any

from redflow import Registry, define_workflow

registry = Registry()


def welcome_input(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("user"), int):
        raise ValueError('the input is {"user": <int>}')
    return value


@define_workflow("send-welcome", schema=welcome_input, events=["user.created"], registry=registry)
def send_welcome(ctx):
    return {"sent_to": ctx.input["user"]}


@define_workflow("review", registry=registry)
def review(ctx):
    decision = ctx.step.wait_for_signal("approve", timeout=86400)  # a day, then None
    return {"doc": ctx.input["doc"], "approved_by": decision["by"] if decision else None}
