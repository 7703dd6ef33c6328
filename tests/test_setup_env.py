"""scripts/setup-env installs what its caller needs and nothing more: the demo
gets redis-server (and the package), the docs the [docs] extras, the tests
also faketime, Chromium, curl and jq (and the [test] and [docs] extras), and
the asyncio redflow 0.1.9 in a virtualenv of its own.

The script runs from a copy whose PATH holds only a few real tools and a stub
apt-get that records what it was asked to install (and a .venv already up
to date, so pip is not run): a machine without redis-server, faketime or a
browser, where nothing is really installed.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

TOOLS = ("bash", "dirname", "id", "touch", "grep", "cat")


@pytest.fixture
def bare_machine(tmp_path):
    """(run, apt log): run(*args) runs the copied setup-env on a PATH with no redis-server, faketime or chromium."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup-env", tmp_path / "scripts" / "setup-env")
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text('#!/bin/sh\necho "python $*" >> "$APT_LOG"\n')
    (venv_bin / "python").chmod(0o755)
    for stamp in (".redflow-installed", ".redflow-test-installed", ".redflow-docs-installed"):
        (tmp_path / ".venv" / stamp).touch()  # newer than setup.py: the package is installed
    (tmp_path / ".venv-redflow019").mkdir()
    (tmp_path / ".venv-redflow019" / ".installed-0.1.9").touch()  # the asyncio redflow of the interop tests too
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), bin_dir / tool)
    apt_log = tmp_path / "apt.log"
    for stub in ("apt-get", "sudo"):
        body = 'echo "$0 $*" >> "$APT_LOG"\n' if stub == "apt-get" else 'exec "$@"\n'
        (bin_dir / stub).write_text(f"#!{shutil.which('bash')}\n{body}")
        (bin_dir / stub).chmod(0o755)

    def run(*args):
        env = {"PATH": str(bin_dir), "APT_LOG": str(apt_log), "HOME": str(tmp_path)}
        done = subprocess.run([shutil.which("bash"), str(tmp_path / "scripts" / "setup-env"), *args], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [
            Path(line.split()[0]).name + " " + " ".join(line.split()[1:])
            for line in (apt_log.read_text() if apt_log.exists() else "").splitlines()
        ]

    return run


def test_the_demo_set_up_installs_redis_server_and_no_browser(bare_machine):
    assert bare_machine() == ["apt-get update -qq", "apt-get install -y -qq redis-server"]


def test_the_test_set_up_also_installs_faketime_chromium_curl_and_jq(bare_machine):
    installs = [line for line in bare_machine("--test") if "install" in line]
    packages = ("redis-server", "faketime", "chromium", "chromium-driver", "curl", "jq")
    assert installs == [f"apt-get install -y -qq {package}" for package in packages]


def test_the_test_set_up_makes_the_asyncio_redflow_virtualenv_once(bare_machine, tmp_path):
    (tmp_path / ".venv-redflow019" / ".installed-0.1.9").unlink()
    mkdir, chmod = shutil.which("mkdir"), shutil.which("chmod")
    # a python3 whose virtualenvs hold a python that only logs what it is asked, as "venv:<dir> ..."
    logging_python = '#!/bin/sh\\necho "venv:%s $*" >> "$APT_LOG"\\n'
    (tmp_path / "bin" / "python3").write_text(
        f'#!{shutil.which("bash")}\necho "python3 $*" >> "$APT_LOG"\n'
        f'if [ "$2" = venv ]; then {mkdir} -p "$3/bin"; '
        f'printf \'{logging_python}\' "$3" > "$3/bin/python"; {chmod} +x "$3/bin/python"; fi\n'
    )
    (tmp_path / "bin" / "python3").chmod(0o755)
    first = [line for line in bare_machine("--test") if ".venv-redflow019" in line]
    assert first == [
        "python3 -m venv .venv-redflow019",
        "venv:.venv-redflow019 -m pip install -q --disable-pip-version-check --no-deps redflow==0.1.9",
        "venv:.venv-redflow019 -m pip install -q --disable-pip-version-check redis>=5.0.0 cronsim>=2.6 jsonschema>=4.25",
        "venv:.venv-redflow019 -I -c import redflow.worker",
    ]
    assert [line for line in bare_machine("--test") if ".venv-redflow019" in line] == first  # installed once: nothing more


def test_scripts_demo_runs_the_set_up_without_test_extras():
    demo = (ROOT / "scripts" / "demo").read_text()
    assert "scripts/setup-env\n" in demo and "--test" not in demo


def test_the_docs_set_up_installs_no_debian_package(bare_machine):
    assert bare_machine("--docs") == []


@pytest.mark.parametrize(("option", "spec"), [("", "."), ("--docs", ".[docs]"), ("--test", ".[test,docs]")])
def test_each_set_up_installs_its_extras_when_setup_py_is_newer(bare_machine, tmp_path, option, spec):
    (tmp_path / "setup.py").touch()
    os.utime(tmp_path / "setup.py", (2**31, 2**31))  # newer than every stamp
    pips = [line for line in bare_machine(*[option] if option else []) if " pip install " in line]
    assert pips == [f"python -m pip install -q --disable-pip-version-check -e {spec}"]


def test_scripts_docs_builds_strictly_after_the_docs_set_up():
    docs = (ROOT / "scripts" / "docs").read_text()
    assert "scripts/setup-env --docs\n" in docs and "mkdocs build --strict" in docs
