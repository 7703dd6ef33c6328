"""The Python examples of README.md and docs/ do what they say.

Each ```python block is marked (tests/doc_pages.py): a runnable one runs
here as a script against the private redis-server (warnings are errors),
and its output is checked where the page says what it prints; an excerpt's
lines are lines of its file, in order (the file is run by its own test); a
fragment is not run. A block without a marker fails, so that no example
claims to run without a test that runs it.
"""

import os
import subprocess
import sys

import pytest
from doc_pages import ROOT, Block, python_blocks, runnable_blocks, script_of

BLOCKS = python_blocks()
RUNNABLE = runnable_blocks()

WAITS_OUTPUT = [
    "scheduled {'stage': 'cooling down'}",
    "{'approved': True, 'by': 'ada', 'pages': ['page 0', 'page 1', 'page 2']}",
]
VALUES_REFUSAL = (
    'input of workflow \'remind\' is not JSON-serializable: input["items"][1]["when"] is a datetime: '
    "JSON has no dates or times, pass value.isoformat() (or a unix time) and parse it in the handler"
)

#: What the examples print, where their pages say it (in a comment beside the print).
EXPECTED_OUTPUT = {
    "readme": lambda out: out.splitlines() == ["{'sent': 'Hello, Ada!'}"],
    "client": lambda out: "scheduled" in out and "True" in out and "still running after 0.5 s" in out,
    "tags": lambda out: "{'customer': '42', 'tenant': 'acme'}" in out,
    "worker": lambda out: out.splitlines() == ["42"],
    "retention": lambda out: out.splitlines() == ["0", "0"],
    "flow-control": lambda out: out.splitlines() == ["99 20"],
    "waits": lambda out: out.splitlines() == WAITS_OUTPUT,
    "values": lambda out: out.splitlines() == [VALUES_REFUSAL, "2027"],
    "versioned-step": lambda out: out.splitlines() == ["by post / by courier"],
    "interop": lambda out: out.splitlines() == ["{'pages': 300}", "shop:default", "@blob:v1:", "[1,1,1,"],
    "retries": lambda out: out.splitlines() == ["{'synced': '42', 'attempts': 3}", "ValueError", "report.csv"],
    "deadlines": lambda out: out.splitlines() == ["DeadlineExceededError start", "DeadlineExceededError timeout", "['start', 'timeout']"],
    "singleton": lambda out: out.splitlines() == ["True False", "{'account': '42', 'full': True}", "False", "canceled 2"],
    "debounce": lambda out: out.splitlines() == ["1 Hello", "3"],
    "streams": lambda out: out.splitlines() == ["Hello from a durable stream ", "{'words': 5}"],
    "streams-pages": lambda out: (
        out.splitlines() == ["[(1, 'header'), (1, 'row 1'), (1, 'row 2'), (2, 'header')]", "[(2, 'row 1'), (2, 'row 2')]"]
    ),
    "streams-inline": lambda out: out.splitlines() == ["[3, 2, 1] [1, 1, 1]"],
    "emit-workflow": lambda out: out.splitlines() == ["sent to ada@example.com", "True {'customer': '42', 'kind': 'mail'}", "1"],
    "signals": lambda out: out.splitlines() == ["{'published': True, 'by': 'ada', 'edits': ['fix the title']}", "False"],
    "schemas": lambda out: (
        out.splitlines()
        == [
            "['lines'] has 0 items, fewer than 1",
            '[\'carrier\'] "fedex" is not one of "dhl", "ups"',
            "queued",
        ]
    ),
    "schedules": lambda out: (
        out.splitlines() == ["[('heartbeat', False), ('nightly-report', False)]", "{'kind': 'daily'}", "True None", "['nightly-report']"]
    ),
}


def run_script(code: str, redis_url: str, prefix: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, REDIS_URL=redis_url, REDFLOW_PREFIX=prefix, PYTHONWARNINGS="error", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_every_python_block_says_whether_it_runs():
    unmarked = [block.where for block in BLOCKS if block.kind is None]
    assert unmarked == [], "mark each block <!-- runnable: NAME -->, <!-- excerpt: PATH --> or <!-- fragment -->"
    names = [block.name for block in BLOCKS if block.kind == "runnable"]
    assert "" not in names and len(names) == len(set(names)), f"runnable blocks need unique names: {names}"
    assert [block.where for block in RUNNABLE.values() if block.after and block.after not in RUNNABLE] == []


def test_the_examples_whose_output_is_checked_are_still_there():
    assert sorted(set(EXPECTED_OUTPUT) - set(RUNNABLE)) == []


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "excerpt"], ids=lambda b: b.where)
def test_an_excerpt_is_lines_of_its_file_in_order(block: Block):
    source = [line.strip() for line in (ROOT / block.argument).read_text().splitlines()]
    position = 0
    for line in (line.strip() for line in block.code.splitlines() if line.strip()):
        assert line in source[position:], f"{block.where}: {line!r} is not in {block.argument} (after line {position})"
        position = source.index(line, position) + 1


@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_a_runnable_example_runs(name, redis_url, prefix):
    block = RUNNABLE[name]
    result = run_script(script_of(block, RUNNABLE), redis_url, prefix)
    assert result.returncode == 0, f"{block.where}:\n{result.stderr}"
    check = EXPECTED_OUTPUT.get(name)
    assert check is None or check(result.stdout), f"{block.where} printed:\n{result.stdout}"
