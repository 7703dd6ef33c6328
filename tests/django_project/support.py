"""What the Django tests share: worker subprocesses and waiting for a task."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import django
import pytest

try:  # Django 6: the tasks framework is Django's
    from django.tasks import TaskResultStatus, default_task_backend, task, task_backends
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import TaskResultStatus, default_task_backend, task, task_backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist

__all__ = ["InvalidTask", "TaskResultDoesNotExist", "TaskResultStatus", "default_task_backend", "task", "task_backends"]
#: Which framework the tests run on: "django.tasks" (Django 6) or the backport.
FRAMEWORK = "django.tasks" if django.VERSION >= (6,) else "django_tasks"

HERE = Path(__file__).parent
WAIT_S = 60.0  # how long a test waits for a worker to finish a task: generous, never a measure


class Workers:
    """``manage.py redflow_worker`` subprocesses; each is stopped (SIGTERM, then SIGKILL) at the end of the test."""

    def __init__(self, env, log_dir):
        self.env = env
        self.log_dir = log_dir
        self.procs = []

    def start(self, *args, env=None, script="manage.py", cwd=HERE):
        """Start ``python manage.py redflow_worker ARGS``; stopped at the end of the test."""
        log = open(self.log_dir / f"worker-{len(self.procs)}.log", "w+")  # noqa: SIM115 - closed in stop_all
        cmd = [sys.executable, script, "redflow_worker", *args]
        proc = subprocess.Popen(cmd, cwd=cwd, env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((proc, log))
        return proc

    def run(self, *args, manage=False, env=None, timeout=WAIT_S):
        """Run ``manage.py redflow_worker ARGS`` (``manage.py ARGS`` with ``manage``) to its end: (exit status, output)."""
        command = [*args] if manage else ["redflow_worker", *args]
        done = subprocess.run([sys.executable, "manage.py", *command], cwd=HERE, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    def logs(self):
        out = []
        for proc, log in self.procs:
            log.seek(0)
            out.append(f"--- worker pid {proc.pid} (exit {proc.poll()}) ---\n{log.read()}")
        return "\n".join(out)

    def stop(self, proc, timeout=30.0):
        """SIGTERM (a graceful stop) and wait; the exit status."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def stop_all(self):
        for proc, log in self.procs:
            self.stop(proc)
            log.close()


def wait_finished(result, workers=None, timeout=WAIT_S):
    """Refresh ``result`` until its task has finished; a failure with the workers' logs if it does not."""
    deadline = time.monotonic() + timeout
    while not result.is_finished:
        if time.monotonic() > deadline:
            logs = workers.logs() if workers else ""
            pytest.fail(f"task {result.id} not finished within {timeout}s (status {result.status})\n{logs}")
        time.sleep(0.05)
        result.refresh()
    return result
