"""The test project's tasks."""

import os

import gevent
from django.db import transaction
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
    """A row made inside a transaction that spans a greenlet switch: each greenlet
    must have a connection of its own, or the transactions of two tasks interleave."""
    with transaction.atomic():
        thing = Thing.objects.create(name=name, made_by=f"pid {os.getpid()}")
        gevent.sleep(0.01)
        assert Thing.objects.filter(pk=thing.pk).exists()
    return thing.pk


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
    }


@task
def bad_return():
    return {1: "an int key, which JSON would turn into a string"}


async def coroutine():
    """Not a task: the backend refuses async functions (see the tests)."""
