"""The README's Python examples run as written (against a private redis-server)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def runnable_blocks() -> tuple[str, str, str]:
    """The Workflows, Client and Worker examples (the other blocks show
    servers, or are the examples/ files that their own tests run)."""
    blocks = python_blocks()
    workflows = next(b for b in blocks if '@define_workflow(\n    "send-welcome"' in b)
    client = next(b for b in blocks if "client = create_client()" in b)
    worker = next(b for b in blocks if "with start_worker(registry, concurrency=50)" in b)
    return workflows, client, worker


def run_python(code: str, redis_url: str, prefix: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix, PYTHONWARNINGS="error")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_the_readme_has_the_examples_this_test_runs():
    workflows, client, worker = runnable_blocks()
    assert "ctx.step.run_workflow" in workflows and "handle.result" in client and "monkey.patch_all()" in worker


@pytest.mark.parametrize("case", ["workflows+client", "worker"])
def test_readme_examples_run(case, redis_url, prefix):
    workflows, client, worker = runnable_blocks()
    code = "from gevent import monkey\nmonkey.patch_all()\n" + workflows + client if case == "workflows+client" else worker
    result = run_python(code, redis_url, prefix)
    assert result.returncode == 0, result.stderr
    if case == "worker":
        assert result.stdout.strip().endswith("42")
    else:
        assert "scheduled" in result.stdout and "True" in result.stdout and "still running" in result.stdout


def test_the_flow_control_example_runs(redis_url, prefix):
    (block,) = [b for b in python_blocks() if "Concurrency(limit=2, key=lambda input" in b]
    result = run_python(block, redis_url, prefix)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("99 20")


def test_the_durable_waits_example_runs(redis_url, prefix):
    block = next(b for b in python_blocks() if '"approve-order"' in b)
    result = run_python(block, redis_url, prefix)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "scheduled {'stage': 'cooling down'}",
        "{'approved': True, 'by': 'ada', 'pages': ['page 0', 'page 1', 'page 2']}",
    ]
