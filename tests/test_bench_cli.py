"""`redflow-gevent bench`: small runs print and save every figure; --compare
fails on a regression. No speed is asserted: the machine is shared."""

import re
import subprocess
from collections import Counter

import pytest
from helpers import CLI, ROOT

from redflow.bench.phases import per_run_redis_cpu
from redflow.bench.probe import ServerDelta, percentiles
from redflow.bench.profile import summarize
from redflow.bench.report import COMPARED, HIGHER, LOWER, compare, figure, load_text
from redflow.core import codec

SMALL = ["-n", "200", "-c", "20", "--rate", "400", "--paced-runs", "40", "--idle", "0.5"]
TINY = ["-n", "100", "-c", "5", "--rate", "0", "--idle", "0"]


def bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "--log-level", "warning", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One small in-process bench with every phase, saved as JSON."""
    path = tmp_path_factory.mktemp("bench") / "results.json"
    done = bench(*SMALL, "--json", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, codec.loads(path.read_text())


def test_a_small_bench_prints_every_phase(small_run):
    out, _ = small_run
    for text in ("drain", "dequeue->finalize", "round trips / run", "CPU / 1,000 runs", "enqueue->start", "enqueue->result",
                 "idle", "peak RSS", "hot-path timestamps", "Redis CPU / run", "one Redis core serves at most",
                 "Redis memory kept / finished run"):  # fmt: skip
        assert text in out
    assert re.search(r"load average \d+\.\d\d \d+\.\d\d \d+\.\d\d \(1, 5, 15 min\)", out)


def test_a_small_bench_saves_every_compared_figure_with_its_machine(small_run):
    _, result = small_run
    missing = [path for path in COMPARED if figure(result, path) is None]
    assert missing == []
    meta = result["meta"]
    assert meta["worker"] == "in-process" and meta["precise_timestamps"] is True and meta["concurrency"] == 20
    assert meta["redis_version"] and meta["date"] and meta["cpus"] >= 1
    drain = result["drain"]
    assert drain["runs"] == 200 and drain["runs_per_s"] > 0
    assert 1 <= drain["commands_per_run_by_command"]["fcall"] <= 2  # a settle (that starts the next run), a start after a BLMOVE
    # scripts' own calls are not round trips, and slots sharing a connection send many calls per read
    assert 0 < drain["round_trips_per_run"] < drain["commands_per_run"]
    assert "info" not in drain["commands_per_run_by_command"] and drain["bench_commands"]["rename"] == 1
    for phase, name in (("drain", "dequeue_to_finalize_ms"), ("paced", "enqueue_to_result_ms"), ("paced", "enqueue_to_start_ms")):
        stats = result[phase][name]
        assert 0 <= stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"]
    assert result["paced"]["runs"] == 40
    assert drain["redis_cpu_us_per_run"] > 0 and drain["runs_per_s_per_redis_core"] == pytest.approx(1e6 / drain["redis_cpu_us_per_run"])
    assert drain["redis_bytes_kept_per_run"] > 100  # a run hash, its index entries and its wake-up list at least
    assert result["idle"]["rss_mb"] > 0 and result["idle"]["cpu_percent"] >= 0 and result["peak_rss_mb"] >= result["idle"]["rss_mb"]


def _doctored(result, factor):
    """A copy of ``result`` whose compared figures are all ``factor`` times better (< 1: worse)."""
    copy = codec.loads(codec.dumps(result))
    for path, better in COMPARED.items():
        *parents, leaf = path.split(".")
        node = copy
        for part in parents:
            node = node[part]
        node[leaf] = node[leaf] * factor if better == HIGHER else node[leaf] / factor
    return copy


def test_compare_exits_non_zero_past_the_bound_and_zero_within_it(small_run, tmp_path):
    _, result = small_run
    strict, generous = tmp_path / "strict.json", tmp_path / "generous.json"
    strict.write_text(codec.dumps(_doctored(result, 1000.0)))
    generous.write_text(codec.dumps(_doctored(result, 0.001)))

    failed = bench(*TINY, "--compare", str(strict), "--max-regression", "0.10")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "REGRESSED" in failed.stdout and "drain.runs_per_s" in failed.stdout.split("regression(s):")[1]
    why = failed.stderr.strip().splitlines()[-1]  # why it exits 1, said last
    worse = rf"bench: exit status 1: \d+ figure\(s\) worse than {re.escape(str(strict))}'s by more than --max-regression 10%: "
    assert re.match(worse, why)
    assert "drain.runs_per_s" in why
    # the same kind of bench with other settings: compared, with a warning that names them
    warning = next(line for line in failed.stdout.splitlines() if line.startswith("warning: the baseline was taken with other settings"))
    assert "concurrency: 20 in the baseline, 5 here" in warning and "runs: 200 in the baseline, 100 here" in warning

    passed = bench(*TINY, "--repeat", "2", "--compare", str(generous), "--max-regression", "0.10")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "no regression" in passed.stdout and "the median of 2 drains" in passed.stdout


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_a_bench_of_a_worker_subprocess_reads_its_cpu_and_memory(tmp_path):
    path = tmp_path / "sub.json"
    done = bench("--worker", "subprocess", "-n", "200", "-c", "10", "--rate", "200", "--paced-runs", "20", "--idle", "0.3",
                 "--json", str(path))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = codec.loads(path.read_text())
    assert result["meta"]["worker"] == "subprocess" and result["meta"]["precise_timestamps"] is False
    assert "run-hash timestamps" in done.stdout
    assert result["drain"]["worker_cpu_s_per_1000_runs"] > 0 and result["peak_rss_mb"] > 1  # a whole Python process
    assert result["drain"]["round_trips_per_run"] > 0


@pytest.mark.slow  # 8-20 s: started first (tests/parallel.py), so that it does not run alone at the end
def test_a_bench_with_steps_counts_their_writes_and_a_replayed_one_does_not(tmp_path):
    calls = {}
    for name, extra in (("first", []), ("replayed", ["--replay"])):
        path = tmp_path / f"{name}.json"
        done = bench("--steps", "3", *extra, *TINY, "--json", str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        calls[name] = codec.loads(path.read_text())["drain"]["commands_per_run_by_command"]["hset"]
        assert f"bench-steps (3 step(s){', replayed' if extra else ''})" in done.stdout
    # the three records ride on the settle, one HSET of the steps hash (engine/step_records.py); a replay writes none
    assert calls["replayed"] + 0.9 < calls["first"], calls


def test_a_bench_on_a_given_redis_leaves_none_of_its_keys_there(redis_url, r):
    done = bench(*TINY, "--redis-url", redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "127.0.0.1" in done.stdout and r.keys("redflow-bench:*") == []


def test_a_bench_that_cannot_finish_says_why_and_exits_2():
    done = bench("-n", "2000", "-c", "1", "--rate", "0", "--idle", "0", "--timeout", "0.001")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "runs ended within" in done.stderr and "Traceback" not in done.stderr


def test_the_report_is_not_mixed_with_the_in_process_worker_info_logs():
    done = subprocess.run([CLI, "bench", *TINY], cwd=ROOT, capture_output=True, text=True, timeout=60)  # default --log-level info
    assert done.returncode == 0, done.stdout + done.stderr
    assert "drain" in done.stdout and "worker started" not in done.stdout + done.stderr and " INFO " not in done.stderr


def test_bench_refuses_replay_without_steps():
    done = bench("--replay", *TINY)
    assert done.returncode == 2 and "--replay needs --steps" in done.stderr


@pytest.mark.parametrize(("field", "value"), [("worker", "subprocess"), ("steps", 3), ("replay", True)])
def test_compare_refuses_a_baseline_measured_another_way_before_measuring(small_run, tmp_path, field, value):
    """A subprocess worker's latencies are whole milliseconds from the run hashes: against
    an in-process baseline every latency read as a regression, and the bench exited 1."""
    _, result = small_run
    other = codec.loads(codec.dumps(result))
    other["meta"][field] = value
    path = tmp_path / "other.json"
    path.write_text(codec.dumps(other))
    done = bench(*TINY, "--compare", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"measured another way ({field}: {value!r} in the baseline, {result['meta'][field]!r} here)" in done.stderr
    assert "drain" not in done.stdout  # refused before anything was measured


def test_compare_refuses_a_file_that_holds_no_bench_results(tmp_path):
    for text, message in (("{not json", "is not valid JSON"), ("[1, 2]", "holds no bench results")):
        path = tmp_path / "bad.json"
        path.write_text(text)
        done = bench(*TINY, "--compare", str(path))
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_the_committed_baseline_is_a_default_bench_and_says_where_and_when_it_was_taken():
    baseline = codec.loads((ROOT / "bench" / "baseline.json").read_text())
    meta = baseline["meta"]
    assert (meta["worker"], meta["steps"], meta["replay"], meta["concurrency"], meta["runs"]) == ("in-process", 0, False, 500, 20000)
    assert missing_figures(baseline) == []
    notes = (ROOT / "bench" / "README.md").read_text()
    assert meta["date"][:10] in notes and meta["cpu"] in notes and f"{meta['cpus']} CPU" in notes
    assert "redflow-gevent bench --repeat 5 --json bench/baseline.json" in notes


def missing_figures(result):
    return [path for path in COMPARED if figure(result, path) is None]


# -- the pieces, without a bench run ------------------------------------------------


def test_compare_judges_each_figure_by_its_direction():
    base = {"drain": {"runs_per_s": 1000.0, "round_trips_per_run": 3.0}, "idle": {"cpu_percent": 0.0}}
    worse = {"drain": {"runs_per_s": 850.0, "round_trips_per_run": 3.2}, "idle": {"cpu_percent": 0.5}}
    rows = {row.path: row for row in compare(worse, base, 0.10)}
    assert set(rows) == {"drain.runs_per_s", "drain.round_trips_per_run", "idle.cpu_percent"}  # absent figures are skipped
    assert rows["drain.runs_per_s"].regressed and rows["drain.runs_per_s"].change == pytest.approx(0.15)
    assert not rows["drain.round_trips_per_run"].regressed  # 6.7 % worse, within 10 %
    assert rows["idle.cpu_percent"].regressed  # from zero, any rise is past any bound
    assert all(not row.regressed for row in compare(base, base, 0.0))
    assert {COMPARED[p] for p in COMPARED} == {HIGHER, LOWER}


def test_the_load_average_is_printed_with_two_decimals():
    assert load_text([0.4580078125, 0.5556640625, 12.0]) == "0.46 0.56 12.00 (1, 5, 15 min)"
    assert load_text(None) == "unknown"


def test_redis_cpu_per_run_gives_the_runs_one_redis_core_can_serve():
    delta = ServerDelta(commands=Counter(), trips=0, cpu_s=0.5, own_commands=Counter())
    assert per_run_redis_cpu(delta, 10_000) == pytest.approx(
        {"redis_cpu_s_per_1000_runs": 0.05, "redis_cpu_us_per_run": 50.0, "runs_per_s_per_redis_core": 20_000.0}
    )
    assert per_run_redis_cpu(ServerDelta(Counter(), 0, 0.0, Counter()), 10)["runs_per_s_per_redis_core"] == 0.0


def test_percentiles_interpolate_between_ranks_in_ms():
    stats = percentiles([i / 1000.0 for i in range(101)])  # 0 .. 100 ms
    assert stats == pytest.approx({"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0})
    assert percentiles([]) == {}


def test_a_profile_summary_adds_up_samples_by_function(tmp_path):
    raw = tmp_path / "profile.raw"
    raw.write_text(
        "Worker._slot (redflow/worker.py:10);SlotConnection.execute (redflow/connection.py:96) 30\n"
        "Worker._slot (redflow/worker.py:12);SocketMixin.send (gevent/_socketcommon.py:716) 50\n"
        "Hub.run (gevent/hub.py:647) 20\n"
    )
    profile = summarize(str(raw))
    assert profile["samples"] == 100
    assert profile["self"][0] == [50.0, "SocketMixin.send (gevent/_socketcommon.py)"]
    assert profile["inclusive_redflow"][0] == [80.0, "Worker._slot (redflow/worker.py)"]  # both lines of it
