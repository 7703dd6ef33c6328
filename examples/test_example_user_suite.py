"""How a project tests its own workflows with redflow's helpers (a runnable example).

    python -m gevent.monkey --module pytest examples/test_example_user_suite.py

``run_inline`` needs neither Redis nor a worker: it runs the handler, its
steps and its child workflows right here. The ``redflow_client`` and
``redflow_worker`` fixtures come from redflow's pytest plugin (installed with
the package) and give each test a private redis-server, its own key prefix
and an in-process worker, for end-to-end tests.
"""

import pytest

from redflow import NonRetryableError, Registry, define_workflow
from redflow.testing import InlineRunner, run_inline

registry = Registry()
PRICES = {"book": 10.0, "pen": 2.5}
calls = {"price": 0}


@define_workflow("quote", registry=registry, max_attempts=3)
def quote(ctx):
    def price():
        calls["price"] += 1
        if ctx.input["sku"] not in PRICES:
            raise NonRetryableError(f"unknown sku {ctx.input['sku']!r}")
        return PRICES[ctx.input["sku"]]

    amount = ctx.step.run("price", price)
    tax = ctx.step.run_workflow("tax", "tax", {"amount": amount})
    if ctx.input.get("flaky") and ctx.run.attempt == 1:
        raise ConnectionError("the first attempt loses its connection")
    return {"total": amount + tax}


@define_workflow("tax", registry=registry)
def tax(ctx):
    return ctx.step.run("compute", lambda: round(ctx.input["amount"] * 0.2, 2))


def test_a_quote_adds_the_tax_computed_by_a_child_workflow():
    assert run_inline(quote, {"sku": "book"}) == {"total": 12.0}


def test_a_retried_quote_replays_its_finished_steps():
    calls["price"] = 0
    run = InlineRunner(registry).run(quote, {"sku": "pen", "flaky": True})
    assert run.result() == {"total": 3.0}
    assert run.attempt == 2 and calls["price"] == 1  # the price step ran once, the retry replayed it
    assert [(s.name, s.status) for s in run.steps] == [("price", "succeeded"), ("tax", "succeeded")]
    assert [child.workflow for child in run.children] == ["tax"]


def test_an_unknown_sku_fails_without_retry():
    with pytest.raises(NonRetryableError, match="unknown sku 'ink'"):
        run_inline(quote, {"sku": "ink"})


def test_a_quote_on_a_real_worker(redflow_client, redflow_worker):
    redflow_worker(registry, concurrency=2)
    assert redflow_client.run(quote, {"sku": "book"}).result(timeout=10) == {"total": 12.0}
