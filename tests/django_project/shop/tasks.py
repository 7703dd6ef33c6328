"""The test project's tasks."""

import os

import gevent
from django.db import connection
from gevent import monkey

from shop.models import Thing

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task


class PaymentError(Exception):
    """Raised by ``charge``: an exception class of the project's own."""


@task
def add(a, b):
    return a + b


@task(queue_name="emails", priority=50)
def send_email(to, subject="hello"):
    return {"to": to, "subject": subject}


@task
def charge(amount):
    raise PaymentError(f"card declined for {amount}")


@task
def record(name):
    return Thing.objects.create(name=name, made_by=f"pid {os.getpid()}").pk


#: The database connections of the tasks in flight in this process (their ids).
_connections_in_use = set()


@task
def hold_connection(name):
    """Query, yield to the other greenlets, query again: fails if a task in
    flight at the same time in this process uses the same database connection
    (as all do when gevent patched threading after Django made its connections)."""
    count = Thing.objects.filter(name=name).count()
    mine = id(connection.connection)
    if mine in _connections_in_use:
        raise AssertionError(f"database connection {mine:#x} is in use by another task in flight")
    _connections_in_use.add(mine)
    try:
        gevent.sleep(0.02)
        assert id(connection.connection) == mine, "another task replaced this task's connection"
        return count + Thing.objects.filter(name=name).count()
    finally:
        _connections_in_use.discard(mine)


@task
def count(name):
    return Thing.objects.filter(name=name).count()


@task(takes_context=True)
def introspect(context, label):
    return {
        "label": label,
        "id": context.task_result.id,
        "attempt": context.attempt,
        "status": str(context.task_result.status),
        "patched": monkey.is_module_patched("socket") and monkey.is_module_patched("threading"),
        "run_again_marker": os.environ.get("REDFLOW_DJANGO_REEXEC"),
    }


@task
def bad_return():
    return {1: "an int key, which JSON would turn into a string"}


async def coroutine():
    """Not a task: the backend refuses async functions (see the tests)."""
