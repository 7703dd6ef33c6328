"""The transaction pattern Django documents: enqueue with
``transaction.on_commit(partial(task.enqueue, ...))``, so that a task is
enqueued once the rows it reads are committed, and never when they are
rolled back."""

from functools import partial

import pytest
from django.db import transaction
from shop.models import Thing
from shop.tasks import count
from support import TaskResultStatus, wait_finished


class Rollback(Exception):
    pass


def runs_of(client, task):
    return client.list_runs(tags={"task": task.module_path})


def test_a_task_enqueued_on_commit_of_a_transaction_that_rolls_back_never_runs(workers, redflow_client):
    with pytest.raises(Rollback), transaction.atomic():
        Thing.objects.create(name="rolled back")
        transaction.on_commit(partial(count.enqueue, "rolled back"))
        raise Rollback
    assert runs_of(redflow_client, count) == []  # never enqueued, so no worker can run it
    workers.start("-c", "1")
    marker = wait_finished(count.enqueue("marker"), workers)  # a worker served the queue since
    assert [run.id for run in runs_of(redflow_client, count)] == [marker.id]
    assert not Thing.objects.filter(name="rolled back").exists()


def test_a_task_enqueued_on_commit_is_enqueued_after_the_commit_and_reads_the_committed_row(workers, redflow_client):
    enqueued = []
    with transaction.atomic():
        Thing.objects.create(name="committed")
        transaction.on_commit(lambda: enqueued.append(count.enqueue("committed")))
        assert runs_of(redflow_client, count) == []  # not before the commit
    [result] = enqueued
    assert [run.id for run in runs_of(redflow_client, count)] == [result.id]
    workers.start()
    wait_finished(result, workers)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 1)


def test_a_task_enqueued_directly_inside_a_transaction_is_enqueued_at_once_whatever_the_transaction_does(redflow_client):
    """Why the pattern: Redis is not in the database's transaction."""
    with pytest.raises(Rollback), transaction.atomic():
        result = count.enqueue("too early")
        assert [run.id for run in runs_of(redflow_client, count)] == [result.id]
        raise Rollback
    assert [run.id for run in runs_of(redflow_client, count)] == [result.id]
