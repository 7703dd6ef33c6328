"""The README's Django steps, followed in a new project (``django-admin
startproject``, ``manage.py startapp shop``): its settings and tasks blocks as
written, then its commands, the worker and the two shell commands."""

import re
import shlex
import subprocess
import sys
import time

from support import FRAMEWORK, HERE, WAIT_S, Workers

README = HERE.parent.parent / "README.md"


def readme_django_section():
    return README.read_text().split("## Django tasks\n", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_django_steps_take_a_new_project_to_a_task_run_by_the_worker(tmp_path, redflow_redis_server, worker_env):
    section = readme_django_section()
    settings_block, tasks_block = re.findall(r"```python\n(.*?)```", section, re.S)
    commands = [shlex.split(line, comments=True) for line in section.splitlines() if line.startswith("python manage.py")]
    worker_cmd, enqueue_cmd, result_cmd = [[sys.executable, *command[1:]] for command in commands]

    project = tmp_path / "mysite"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "django", "startproject", "mysite", str(project)], check=True)
    subprocess.run([sys.executable, "manage.py", "startapp", "shop"], cwd=project, check=True)
    settings = settings_block.replace("    # ...\n", "    *INSTALLED_APPS,\n").replace("redis://127.0.0.1:6379/0", redflow_redis_server.url)
    with open(project / "mysite" / "settings.py", "a") as file:
        file.write("\n" + settings)
    # On Django 5.2 the task decorator is the backport's, as docs/django.md says.
    (project / "shop" / "tasks.py").write_text(tasks_block.replace("from django.tasks import", f"from {FRAMEWORK} import"))
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["REDFLOW_PREFIX"] = worker_env["REDFLOW_TEST_PREFIX"]  # the block sets no PREFIX: keep the test's own

    workers = Workers(env, tmp_path)
    workers.start(*worker_cmd[3:], script=worker_cmd[1], cwd=project)
    try:
        enqueued = subprocess.run(enqueue_cmd, cwd=project, env=env, capture_output=True, text=True, check=True)
        run_id = enqueued.stdout.split()[-1]  # Django 6's shell says first how many objects it imported
        assert run_id.startswith("run_"), enqueued.stdout + enqueued.stderr
        read = [part.replace("run_8a1f...", run_id) for part in result_cmd]
        deadline = time.monotonic() + WAIT_S
        while (done := subprocess.run(read, cwd=project, env=env, capture_output=True, text=True)).stdout.split()[-1:] != ["5"]:
            assert "not finished yet" in done.stderr, done.stderr  # READY or RUNNING: ask again
            assert time.monotonic() < deadline, workers.logs()
            time.sleep(0.2)
    finally:
        workers.stop_all()
