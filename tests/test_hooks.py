"""Observers see attempts, steps, claims, lost leases and recoveries."""

from gevent.event import Event
from helpers import wait_until

from redflow import define_workflow
from redflow.engine.observers import WorkerObserver


class Recorder(WorkerObserver):
    def __init__(self):
        self.attempts, self.steps, self.claims, self.lost, self.recovered = [], [], [], [], []

    def on_attempt(self, report):
        self.attempts.append(report)

    def on_step(self, workflow, step, status, duration_s):
        self.steps.append((workflow, step, status))

    def on_claim(self, queue, waited_s):
        self.claims.append(queue)

    def on_lease_lost(self, run_id):
        self.lost.append(run_id)

    def on_recovered(self, queue, count):
        self.recovered.append((queue, count))


class Broken(WorkerObserver):
    def on_attempt(self, report):
        raise RuntimeError("observer bug")


def test_observers_see_the_hot_path_and_a_broken_one_changes_nothing(start, registry, client, r):
    @define_workflow("seen", registry=registry)
    def seen(ctx):
        ctx.step.run("one", lambda: 1)
        return "ok"

    released = Event()

    @define_workflow("lose", registry=registry)
    def lose(ctx):
        released.wait(5)  # long enough to lose its lease; released at the end, so teardown need not wait it out

    rec = Recorder()
    start(observers=[Broken(), rec], lease_ms=300)
    handle = seen.run(None, client=client)
    assert handle.result(5) == "ok"
    report = wait_until(lambda: rec.attempts and rec.attempts[0])
    assert report.run_id == handle.id and report.outcome == "succeeded" and report.workflow == "seen"
    assert report.claimed_at <= report.started_at <= report.finished_at and report.created_at_ms > 0
    assert rec.steps == [("seen", "one", "succeeded")] and rec.claims == ["default"]

    stolen = lose.run(None, client=client)
    wait_until(lambda: r.get(client.keys.run_lease(stolen.id, "default")))
    r.delete(client.keys.run_lease(stolen.id, "default"))
    wait_until(lambda: rec.lost == [stolen.id], timeout=3)
    wait_until(lambda: rec.recovered == [("default", 1)], timeout=3)  # the reaper hands it back
    released.set()
