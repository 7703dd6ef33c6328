"""bench/peers.py's table on made-up drains (the bench itself takes minutes and is not part of the suite)."""

import argparse
import importlib.util
import sys

import pytest
from helpers import ROOT


@pytest.fixture(scope="module")
def peers():
    spec = importlib.util.spec_from_file_location("peers_bench", ROOT / "bench" / "peers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def drains(peers):
    ours, theirs = "redflow-gevent `-c 500`, 1 process", "Dramatiq gevent, 2 processes × 50"
    return [  # system, jobs, seconds, worker CPU s, Redis CPU s, commands, kept bytes, kept jobs
        peers.Drain(ours, 10_000, 2.0, 1.0, 0.5, 120_000, 11_000_000.0, 11_000),
        peers.Drain(theirs, 10_000, 4.0, 4.0, 0.25, 60_000, 1_100_000.0, 11_000),
        peers.Drain(ours, 10_000, 2.5, 1.2, 0.7, 120_000, 11_000_000.0, 11_000),
        peers.Drain(theirs, 10_000, 5.0, 5.0, 0.35, 60_000, 1_100_000.0, 11_000),
        peers.Drain(ours, 10_000, 1.0, 0.8, 0.6, 120_000, 11_000_000.0, 11_000),
        peers.Drain(theirs, 10_000, 2.5, 3.0, 0.2, 60_000, 1_100_000.0, 11_000),
    ]


def test_the_table_gives_medians_with_ranges_then_the_ratio_to_each_peer(peers):
    lines = peers.render(drains(peers)).splitlines()
    assert lines[0] == "| system | jobs/s | worker CPU µs/job | Redis CPU µs/job | Redis commands/job | Redis bytes kept/job |"
    ours = "| 5,000 (4,000-10,000) | 100 (80-120) | 60 (50-70) | 12.0 (12.0-12.0) | 1,000 (1,000-1,000) |"
    theirs = "| 2,500 (2,000-4,000) | 400 (300-500) | 25 (20-35) | 6.0 (6.0-6.0) | 100 (100-100) |"
    assert lines[2] == "| redflow-gevent `-c 500`, 1 process " + ours
    assert lines[3] == "| Dramatiq gevent, 2 processes × 50 " + theirs
    assert lines[lines.index("| ÷ | jobs/s | worker CPU µs/job | Redis CPU µs/job | Redis commands/job | Redis bytes kept/job |") + 2] == (
        "| Dramatiq gevent, 2 processes × 50 | 2.00× | 0.25× | 2.40× | 2.00× | 10.00× |"
    )


def test_redis_cpu_is_also_compared_rep_by_rep(peers):
    """Each rep's ratio (50/25, 70/35, 60/20) and their median, beside the ratio of medians (60/25)."""
    assert peers.render(drains(peers)).splitlines()[-1] == "- Dramatiq gevent, 2 processes × 50: median **2.00×** (2.00×, 2.00×, 3.00×)"


def test_one_rep_prints_no_range_and_one_system_no_ratio(peers):
    table = peers.render(drains(peers)[:1])
    assert "| 5,000 | 100 | 50 | 12.0 | 1,000 |" in table and "÷" not in table
    assert peers.render([]) == "(no drain)"


def test_bad_options_are_refused_with_a_clear_message(peers, capsys):
    for argv, message in ((["--systems", "celery"], "unknown ['celery']"), (["--dramatiq", "2"], "PROCESSESxWORKERS"),
                          (["--huey", "0x5"], "PROCESSESxWORKERS"), (["-n", "0"], "must be >= 1")):  # fmt: skip
        with pytest.raises(SystemExit):
            peers.parse_args(argv)
        assert message in capsys.readouterr().err
    args = peers.parse_args(["--systems", "redflow, huey", "--redflow", "2x100"])
    assert args.systems == ["redflow", "huey"] and args.redflow == (2, 100)
    assert isinstance(args, argparse.Namespace)
