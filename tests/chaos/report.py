"""The "redflow chaos report": lines the chaos tests add (the ``report`` fixture of
tests/chaos/conftest.py), shown in a section at the end of the pytest run and
appended to the file named by ``REDFLOW_CHAOS_REPORT``, if set.

A plugin of tests/conftest.py rather than hooks of tests/chaos/conftest.py: under
pytest-xdist the tests run in worker processes and the session ends in the
controller, which loads no conftest below tests/. The lines travel with each
test's report (``user_properties``), which xdist sends to the controller.
"""

from __future__ import annotations

import os

import pytest

#: The ``user_properties`` name of a report line.
PROPERTY = "redflow chaos report"

_LINES: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":  # the last phase: every line of the test is in by then
        _LINES.extend(str(value) for name, value in report.user_properties if name == PROPERTY)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if not _LINES or hasattr(config, "workerinput"):  # an xdist worker's lines go to the controller
        return
    terminalreporter.section("redflow chaos report")
    for line in _LINES:
        terminalreporter.write_line(line)
    path = os.environ.get("REDFLOW_CHAOS_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write("\n".join(_LINES) + "\n")
