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


def run_python(code: str, redis_url: str, prefix: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix, PYTHONWARNINGS="error")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_the_readme_has_the_examples_this_test_runs():
    blocks = python_blocks()
    assert len(blocks) == 3
    assert "define_workflow" in blocks[0] and "create_client()" in blocks[1] and "start_worker" in blocks[2]


@pytest.mark.parametrize("case", ["workflows+client", "worker"])
def test_readme_examples_run(case, redis_url, prefix):
    workflows, client, worker = python_blocks()
    code = "from gevent import monkey\nmonkey.patch_all()\n" + workflows + client if case == "workflows+client" else worker
    result = run_python(code, redis_url, prefix)
    assert result.returncode == 0, result.stderr
    if case == "worker":
        assert result.stdout.strip().endswith("42")
    else:
        assert "scheduled" in result.stdout and "True" in result.stdout and "still running" in result.stdout
