"""`scripts/demo` on a shared Redis ($REDIS_URL) leaves none of its keys there:
nothing serves its throwaway prefix afterwards, so retention never would
delete them (issue 33 found ~18,000 keys, 13 MB, after one demo)."""

from __future__ import annotations

import signal
import subprocess
import sys

from helpers import ROOT, wait_until

from redflow.ops.control.prefix import delete_prefix

DEMO = [sys.executable, str(ROOT / "examples" / "demo.py")]


def demo_keys(r) -> list[str]:
    return r.keys("redflow-demo:*")


def test_the_demo_on_a_shared_redis_deletes_its_keys_when_it_ends(redis_url, r):
    r.set("app:v1:mine", "a key of someone else's")
    done = subprocess.run([*DEMO, "-n", "20", "-c", "20"], cwd=ROOT, env={"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "totals by status" in done.stdout and "deleted the demo's " in done.stdout
    assert demo_keys(r) == [] and r.get("app:v1:mine") == "a key of someone else's"


def stopped_midway(redis_url, r, *options):
    """Run the demo on ``redis_url`` and SIGTERM it once its runs are there: (exit status, output)."""
    demo = subprocess.Popen([*DEMO, "-n", "3000", "-c", "5", *options], cwd=ROOT, env={"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        wait_until(lambda: len(demo_keys(r)) > 100, timeout=60, message="the demo's runs")
        demo.send_signal(signal.SIGTERM)
        output, _ = demo.communicate(timeout=120)
    finally:
        demo.kill()
    return demo.returncode, output


def test_a_demo_stopped_by_sigterm_midway_deletes_its_keys_too(redis_url, r):
    code, output = stopped_midway(redis_url, r)
    assert code == 143 and "worker stopped gracefully" in output and "deleted the demo's " in output, output
    assert demo_keys(r) == []


def test_keep_leaves_the_keys_and_prints_a_command_that_deletes_them(redis_url, r):
    code, output = stopped_midway(redis_url, r, "--keep")
    assert code == 143 and "kept the demo's keys (prefix redflow-demo:" in output, output
    prefix = output.split("kept the demo's keys (prefix ")[1].split(")")[0]
    assert f"redflow-gevent --prefix {prefix} runs list" in output
    assert len(demo_keys(r)) > 100 and {key.split(":")[1] for key in demo_keys(r)} == {prefix.split(":")[1]}
    delete = output.split("and delete them with\n")[1].splitlines()[0].strip()
    subprocess.run(["sh", "-c", delete], env={"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"}, check=True, timeout=60)
    assert demo_keys(r) == []


def test_deleting_a_prefix_spares_the_prefixes_that_start_alike_and_reads_no_glob(r):
    mine = ["qx[1]:a", "qx[1]:b:c", *(f"qx[1]:run:{i}" for i in range(2500))]  # more than a batch
    spared = ["qx[1]x:a", "qx1:a", "qx[1]", "other:qx[1]:a"]
    for key in mine + spared:
        r.set(key, "1")
    assert delete_prefix(r, "qx[1]:") == len(mine)  # a trailing colon is ignored, as Keys does
    assert sorted(r.keys("*qx*")) == sorted(spared)
