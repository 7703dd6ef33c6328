"""`redflow-gevent worker --processes N`: a supervisor and N worker subprocesses on a real redis-server."""

import logging
import os
import re
import signal
import sys

import gevent
import pytest
from helpers import WorkerProcess, wait_until

from redflow.ops.cli import parse_args, supervisor

STARTED = re.compile(r"worker process (\d+) started \(pid (\d+)\)")


def children(worker: WorkerProcess) -> dict[int, int]:
    """Child index -> pid of its latest start, from the supervisor's log."""
    return {int(index): int(pid) for index, pid in STARTED.findall(worker.output())}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_two_processes_run_the_workflows_and_sigterm_drains_them_gracefully(redis_url, prefix, cli_client):
    with WorkerProcess(redis_url, prefix, "--processes", "2") as worker:
        wait_until(lambda: len(children(worker)) == 2 and worker.output().count("worker started") == 2, timeout=20)
        pids = list(children(worker).values())
        handles = [cli_client.run("count", {"key": f"{prefix}:seen", "n": i}) for i in range(20)]
        assert [h.result(20) for h in handles] == [i + 1 for i in range(20)]
        slow = [cli_client.run("sleep", {"s": 1.0, "key": f"{prefix}:slept"}) for _ in range(8)]
        wait_until(lambda: all(h.status() == "running" for h in slow), timeout=10)  # 4 slots a process: both busy
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0
        assert [h.status() for h in slow] == ["succeeded"] * 8  # the runs in flight finished before exit
        output = worker.output()
    assert not [pid for pid in pids if alive(pid)]
    assert output.count("stopping gracefully") == 2 and "restarting" not in output


def test_a_sigkilled_child_is_restarted_and_its_runs_finish(redis_url, prefix, cli_client, r):
    with WorkerProcess(redis_url, prefix, "--processes", "2") as worker:
        # both started: a child still starting leaves its 4 runs to the other, which ends its first 4 meanwhile
        wait_until(lambda: len(children(worker)) == 2 and worker.output().count("worker started") == 2, timeout=20)
        victim = children(worker)[1]
        slow = [cli_client.run("sleep", {"s": 0.5, "key": f"{prefix}:slept"}) for _ in range(8)]
        wait_until(lambda: all(h.status() == "running" for h in slow), timeout=10)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: children(worker)[1] != victim, timeout=20, message="child 1 restarted")
        assert [h.result(30) for h in slow] == ["slept"] * 8  # the killed child's runs: reaped and run again
        assert f"worker process 1 (pid {victim}) was killed by SIGKILL" in worker.output()
        after = [cli_client.run("count", {"key": f"{prefix}:seen", "n": i}) for i in range(10)]
        assert [h.result(20) for h in after] == [i + 1 for i in range(10)]
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0, worker.output()


def test_a_second_signal_stops_the_children_at_once(redis_url, prefix, cli_client):
    with WorkerProcess(redis_url, prefix, "--processes", "2") as worker:
        wait_until(lambda: len(children(worker)) == 2 and worker.output().count("worker started") == 2, timeout=20)
        slow = cli_client.run("sleep", {"s": 60, "key": f"{prefix}:slept"})
        wait_until(lambda: slow.status() == "running", timeout=10)
        worker.signal(signal.SIGTERM)
        wait_until(lambda: worker.output().count("stopping gracefully") == 2, timeout=10)
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 1  # well before the 60 s run or the 30 s grace
        assert "second signal" in worker.output()
    assert slow.status() == "running"  # left to another worker's reaper, as a lone worker leaves it


def test_children_drain_when_the_supervisor_is_killed(redis_url, prefix, cli_client):
    with WorkerProcess(redis_url, prefix, "--processes", "2") as worker:
        wait_until(lambda: len(children(worker)) == 2 and worker.output().count("worker started") == 2, timeout=20)
        pids = list(children(worker).values())
        slow = cli_client.run("sleep", {"s": 1.0, "key": f"{prefix}:slept"})
        wait_until(lambda: slow.status() == "running", timeout=10)
        worker.kill()
        wait_until(lambda: not any(alive(pid) for pid in pids), timeout=20, message="children gone")
    assert slow.status() == "succeeded"  # SIGTERM from the kernel (parent death): a graceful drain


def test_a_start_up_error_in_the_children_stops_the_supervisor_with_its_exit_status(redis_url, prefix):
    with WorkerProcess(redis_url, prefix, "--processes", "2", app="no_such_module_for_redflow") as worker:
        assert worker.wait(timeout=30) == 2  # the worker's start-up error status
        output = worker.output()
    assert "a start-up error" in output and "not restarting" in output
    assert "no module named 'no_such_module_for_redflow'" in output


def test_bad_processes_and_metrics_values_are_refused_with_a_clear_message_and_exit_2(capsys):
    for argv, message in (
        (["worker", "--processes", "0"], "argument --processes: must be >= 1, got 0"),
        (["worker", "--processes", "2", "--metrics-port", "nine"], "--metrics-port: metrics address must be PORT or HOST:PORT"),
        (["worker", "--processes", "2", "--metrics-port", "65535"], "ports 65535..65536, past 65535"),
    ):
        with pytest.raises(SystemExit) as exited:  # main() but its set-up of logging, which would outlive the test
            args = parse_args(argv)
            args.argv = argv
            args.func(args)
        assert exited.value.code == 2 and message in capsys.readouterr().err


def test_each_child_runs_the_same_command_with_one_process_and_its_own_metrics_port():
    argv = ["--log-level", "warning", "worker", "-A", "app", "--processes", "3", "--metrics-port", "0.0.0.0:9100"]
    commands = supervisor.child_commands(argv, 3, "0.0.0.0:9100")
    base = [*supervisor.cli_command(), *argv, "--processes", "1", "--metrics-port"]
    assert commands == [[*base, "0.0.0.0:9100"], [*base, "0.0.0.0:9101"], [*base, "0.0.0.0:9102"]]
    assert [c[-1] for c in supervisor.child_commands(argv, 2, "0")] == ["127.0.0.1:0", "127.0.0.1:0"]
    assert [c[-1] for c in supervisor.child_commands(argv, 2, "[::1]:9100")] == ["[::1]:9100", "[::1]:9101"]
    assert supervisor.child_commands(["worker"], 2, None) == [[*supervisor.cli_command(), "worker", "--processes", "1"]] * 2


def test_a_child_that_keeps_dying_is_restarted_with_a_doubling_backoff(caplog):
    crash = [sys.executable, "-c", "raise SystemExit(3)"]
    keeper = supervisor.Supervisor([crash], first_backoff_s=0.1, max_backoff_s=0.4, startup_s=0.0)
    caplog.set_level(logging.INFO, logger="redflow.supervisor")
    running = gevent.spawn(keeper.run)
    restarts = lambda: [r.getMessage() for r in caplog.records if "restarting it in" in r.getMessage()]  # noqa: E731
    wait_until(lambda: len(restarts()) >= 4, timeout=20)
    keeper.stop()
    assert running.get(timeout=10) == 1  # the child's last exit was an error
    assert [m.rpartition(" in ")[2] for m in restarts()[:4]] == ["0.1 s", "0.2 s", "0.4 s", "0.4 s"]
    assert "exited with code 3" in restarts()[0]
