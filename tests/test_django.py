"""redflow.contrib.django's tests run in virtualenvs of their own.

Django 6 needs Python >= 3.12, and this suite's Python may be older, so the
Django project's tests (tests/django_project/) run in .venv-django (Python
3.12+, Django 6), and again in .venv-django52 (Django 5.2 LTS with the
django-tasks backport: what the backport changes, all of it with
REDFLOW_LONG_TESTS=1); scripts/setup-env --test makes both, with redflow
installed editable. They are never skipped: without a virtualenv this test
fails saying how to make it; when some of them fail it names them and shows
their output.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from helpers import LONG_TESTS, ROOT

PROJECT = ROOT / "tests" / "django_project"
VENVS = {"django-6": ".venv-django", "django-5.2-backport": ".venv-django52"}
TIMEOUT_S = 900
#: What each virtualenv runs of tests/django_project: all of it on Django 6; on 5.2 with the
#: backport, what the backport changes (the backend, its checks, on_commit and one worker run)
#: unless REDFLOW_LONG_TESTS=1 (then all of it: the worker tests are the same code on both).
SUITES = {
    "django-6": ["."],
    "django-5.2-backport": ["."]
    if LONG_TESTS
    else [
        "test_backend.py",
        "test_checks.py",
        "test_transactions.py",
        "test_worker.py::test_tasks_run_on_the_worker_and_their_results_read_back",
    ],
}


def failed_tests(junit_xml: str) -> list[str]:
    """``file::test`` of every failure and error in a JUnit XML report."""
    root = ET.fromstring(junit_xml)
    return [
        f"{case.get('classname')}::{case.get('name')}"
        for case in root.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]


@pytest.mark.slow  # a whole suite of its own (35-60 s, most of a core): the two run one after the other
@pytest.mark.xdist_group("django-suites")
@pytest.mark.parametrize("django", sorted(VENVS))
def test_the_django_project_tests_pass(django, tmp_path):
    python = ROOT / VENVS[django] / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"{python} is missing: scripts/setup-env --test makes it (Django 6 from a Python >= 3.12: python3.13, "
            "python3.12 or pyenv's, or REDFLOW_DJANGO_PYTHON), and says why when it cannot",
            pytrace=False,
        )
    report = tmp_path / "junit.xml"
    cmd = [str(python), "-m", "pytest", "-c", str(PROJECT / "pytest.ini"), "-q", f"--junitxml={report}", *SUITES[django]]
    done = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        failed = failed_tests(report.read_text()) if report.exists() else []
        names = "\n".join(f"  {name}" for name in failed) or "  (no report: pytest did not get to run them)"
        pytest.fail(
            f"the Django tests failed on {django} ({' '.join(cmd)}):\n{names}\n\n{done.stdout[-30000:]}\n{done.stderr[-5000:]}",
            pytrace=False,
        )
    assert " passed" in done.stdout, done.stdout


def test_importing_the_django_package_imports_neither_django_nor_redis():
    """Django imports the package (INSTALLED_APPS) before it is set up, and the
    worker's runner imports it before gevent patches: it must stay light."""
    code = "import sys, redflow.contrib.django; print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'redis', 'gevent')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
