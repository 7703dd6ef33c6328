"""scripts/setup-env installs what its caller needs and nothing more: the demo
gets redis-server (and the package), the docs the [docs] extras, the tests
also faketime, Chromium, curl and jq (and the [test] and [docs] extras), and
the Django and asyncio redflow 0.1.9 virtualenvs of their own. Python packages
go in with uv: the one on the PATH, else one pip installs into .venv once,
else (no uv to be had) with pip.

The script runs from a copy whose PATH holds only a few real tools, a stub
apt-get that records what it was asked to install, and a stub python3 (and
uv, when there is one) whose virtualenvs hold a stub python: each records the
command it ran, and makes the virtualenv (or uv) it was asked for. The
virtualenvs are there and up to date unless a test says otherwise: a machine
without redis-server, faketime or a browser, where nothing is really installed.
"""

import os
import shutil
import subprocess

import pytest
from helpers import ROOT

TOOLS = ("bash", "dirname", "id", "touch", "grep", "cat")
VENVS = (".venv", ".venv-django", ".venv-django52", ".venv-redflow019")
PIP = "-m pip install -q --disable-pip-version-check"
BOOTSTRAP = f".venv/bin/python {PIP} uv"  # pip installs uv into .venv
#: How each way of installing installs ARGS into the virtualenv DIR: uv on the PATH,
#: the uv that pip installed into .venv (after BOOTSTRAP), pip (BOOTSTRAP failed).
INSTALL = {
    "uv": "uv pip install -q --python {dir}/bin/python {args}",
    "bootstrap": ".venv/bin/uv pip install -q --python {dir}/bin/python {args}",
    "pip": f"{{dir}}/bin/python {PIP} {{args}}",
}
MAKE = {  # and how each makes the virtualenv DIR with python3
    "uv": "uv venv -q --clear --python python3 {dir}",
    "bootstrap": ".venv/bin/uv venv -q --clear --python python3 {dir}",
    "pip": "python3 -m venv {dir}",
}


def stub(path, body):
    path.write_text(f"#!{shutil.which('bash')}\n{body}")
    path.chmod(0o755)


class Machine:
    def __init__(self, root):
        self.root, self.bin, self.log = root, root / "bin", root / "commands.log"
        self.env = {"PATH": str(self.bin), "APT_LOG": str(self.log), "HOME": str(root)}

    def run(self, *args):
        """The commands the copied setup-env ran (paths on the stub PATH by their names), apt-get's included."""
        self.log.unlink(missing_ok=True)
        done = subprocess.run([shutil.which("bash"), str(self.root / "scripts" / "setup-env"), *args], env=self.env,
                              cwd=self.root, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return (self.log.read_text() if self.log.exists() else "").replace(f"{self.bin}/", "").splitlines()

    def installer(self, name):
        """Installs with `name` (a key of INSTALL) from now on."""
        if name == "uv":
            shutil.copy(self.root / "stubs" / "uv", self.bin / "uv")
        self.env["STUB_UV_INSTALLS"] = "1" if name == "bootstrap" else ""

    def outdated(self, *venvs):
        """Removes the virtualenvs; setup.py becomes newer than every stamp of those left (all of them without venvs)."""
        for venv in venvs:
            shutil.rmtree(self.root / venv)
        if not venvs:
            os.utime(self.root / "setup.py", (2**31, 2**31))


@pytest.fixture
def machine(tmp_path):
    """A Machine without redis-server, faketime or chromium, with the four virtualenvs up to date and no uv."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup-env", tmp_path / "scripts" / "setup-env")
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    stubs, bin_dir = tmp_path / "stubs", tmp_path / "bin"
    stubs.mkdir()
    bin_dir.mkdir()
    mkdir, cp, touch = (shutil.which(tool) for tool in ("mkdir", "cp", "touch"))
    # a python that records what it runs; -m venv makes a virtualenv of such pythons (with pip), -m ensurepip
    # adds pip, and pip installs uv (with $STUB_UV_INSTALLS) as the stub uv; exit status 1 when it cannot.
    stub(stubs / "python", f'''echo "$0 $*" >> "$APT_LOG"
case "$1 $2" in
  "-m venv") {mkdir} -p "$3/bin" && {cp} {stubs}/python {stubs}/pip "$3/bin/" ;;
  "-m ensurepip") {cp} {stubs}/pip "${{0%/*}}/" ;;
  "-m pip") if [ "${{@: -1}}" = uv ]; then [ -n "$STUB_UV_INSTALLS" ] && {cp} {stubs}/uv "${{0%/*}}/"; fi ;;
esac
''')  # fmt: skip
    stub(stubs / "pip", "exit 1\n")
    # a uv that records what it runs but --version; `uv venv ... DIR` makes a virtualenv of stub pythons (no pip)
    stub(stubs / "uv", f'''[ "$1" = --version ] && exit 0
echo "$0 $*" >> "$APT_LOG"
if [ "$1" = venv ]; then {mkdir} -p "${{@: -1}}/bin" && {cp} {stubs}/python "${{@: -1}}/bin/"; fi
''')  # fmt: skip
    for tool in TOOLS:
        os.symlink(shutil.which(tool), bin_dir / tool)
    for python in ("python3", "python3.13"):  # python3.13: the Django 6 virtualenv's
        shutil.copy(stubs / "python", bin_dir / python)
    stub(bin_dir / "apt-get", 'echo "$0 $*" >> "$APT_LOG"\n')
    stub(bin_dir / "sudo", 'exec "$@"\n')
    stamps = {
        ".venv": (".redflow-installed", ".redflow-test-installed", ".redflow-docs-installed"),
        ".venv-django": (".redflow-django-installed",),
        ".venv-django52": (".redflow-django-installed",),
        ".venv-redflow019": (".installed-0.1.9",),
    }
    for venv, names in stamps.items():
        (tmp_path / venv / "bin").mkdir(parents=True)
        shutil.copy(stubs / "python", tmp_path / venv / "bin")
        shutil.copy(stubs / "pip", tmp_path / venv / "bin")
        for name in names:
            (tmp_path / venv / name).touch()  # newer than setup.py: installed
    return Machine(tmp_path)


def into(venv, commands):
    """The commands that made the virtualenv `venv`, installed into it, or ran its python."""

    def target(words):
        if words[1] == "pip":  # uv pip install -q --python DIR/bin/python ...
            return words[words.index("--python") + 1].split("/")[0]
        return words[-1] if "venv" in words[:3] else words[0].split("/")[0]  # ... venv ... DIR; DIR/bin/python ...

    return [command for command in commands if target(command.split()) == venv]


def apt(commands):
    return [command for command in commands if command.startswith("apt-get ")]


def test_the_demo_set_up_installs_redis_server_and_no_browser(machine):
    assert machine.run() == ["apt-get update -qq", "apt-get install -y -qq redis-server"]


def test_the_test_set_up_also_installs_faketime_chromium_curl_and_jq(machine):
    installs = [line for line in machine.run("--test") if "install" in line]
    packages = ("redis-server", "faketime", "chromium", "chromium-driver", "curl", "jq")
    assert installs == [f"apt-get install -y -qq {package}" for package in packages]


def test_the_docs_set_up_installs_no_debian_package(machine):
    assert machine.run("--docs") == []


@pytest.mark.parametrize("installer", INSTALL)
@pytest.mark.parametrize("option", ["", "--docs", "--test"])
def test_a_set_up_with_its_virtualenvs_up_to_date_runs_no_python_nor_uv(machine, installer, option):
    machine.installer(installer)
    assert apt(commands := machine.run(*[option] if option else [])) == commands


@pytest.mark.parametrize("installer", INSTALL)
@pytest.mark.parametrize(("option", "spec"), [("", "."), ("--docs", ".[docs]"), ("--test", ".[test,docs]")])
def test_each_set_up_installs_its_extras_when_setup_py_is_newer(machine, installer, option, spec):
    machine.installer(installer)
    machine.outdated()
    installs = [command for command in into(".venv", machine.run(*[option] if option else [])) if " install " in command]
    bootstrap = [] if installer == "uv" else [BOOTSTRAP]
    assert installs == [*bootstrap, INSTALL[installer].format(dir=".venv", args=f"-e {spec}")]


@pytest.mark.parametrize("installer", INSTALL)
def test_the_test_set_up_makes_the_asyncio_redflow_virtualenv_once(machine, installer):
    machine.installer(installer)
    machine.outdated(".venv-redflow019")
    install = INSTALL[installer].format
    first = into(".venv-redflow019", machine.run("--test"))
    assert first == [
        MAKE[installer].format(dir=".venv-redflow019"),
        install(dir=".venv-redflow019", args="--no-deps redflow==0.1.9"),
        install(dir=".venv-redflow019", args="redis>=5.0.0 cronsim>=2.6 jsonschema>=4.25"),
        ".venv-redflow019/bin/python -I -c import redflow.worker",
    ]
    assert into(".venv-redflow019", machine.run("--test")) == []  # installed once: nothing more


@pytest.mark.parametrize("installer", INSTALL)
def test_the_test_set_up_makes_the_django_virtualenvs_once(machine, installer):
    machine.installer(installer)
    machine.outdated(".venv-django", ".venv-django52")
    commands = machine.run("--test")
    install, check = INSTALL[installer].format, ".venv-django{}/bin/python -c import redflow, django, pytest; assert"
    make = MAKE[installer].format
    assert into(".venv-django", commands) == [
        make(dir=".venv-django").replace("python3 ", "python3.13 "),  # Django 6 needs Python >= 3.12
        install(dir=".venv-django", args="-e .[django] pytest>=8"),
        f"{check.format('')} django.VERSION[0] == 6, django.VERSION",
    ]
    assert into(".venv-django52", commands) == [
        make(dir=".venv-django52"),
        install(dir=".venv-django52", args="-e .[django] pytest>=8 Django>=5.2,<6 django-tasks>=0.12"),
        f"{check.format('52')} django.VERSION[0] == 5, django.VERSION",
    ]
    assert into(".venv-django", machine.run("--test")) == into(".venv-django52", machine.run("--test")) == []


def test_pip_installs_uv_into_the_virtualenv_once_when_the_path_has_none(machine):
    machine.installer("bootstrap")
    machine.outdated()
    assert BOOTSTRAP in machine.run("--test")
    assert (machine.root / ".venv" / "bin" / "uv").exists()
    machine.outdated()
    assert BOOTSTRAP not in (commands := machine.run("--test"))  # .venv's uv installs
    assert INSTALL["bootstrap"].format(dir=".venv", args="-e .[test,docs]") in commands


def test_a_uv_that_does_not_run_is_none(machine):
    """pyenv's shim of uv is on the PATH even when the current Python has no uv: uv --version fails."""
    stub(machine.bin / "uv", 'echo "uv $*" >> "$APT_LOG"; exit 127\n')
    machine.outdated()
    assert [command for command in machine.run() if "install" in command] == [
        "apt-get install -y -qq redis-server",
        BOOTSTRAP,
        INSTALL["pip"].format(dir=".venv", args="-e ."),
    ]


def test_pip_adds_itself_to_a_virtualenv_made_by_uv_first(machine):
    """A virtualenv made by uv has no pip: when uv can no longer be had, ensurepip adds it."""
    machine.installer("uv")
    machine.outdated(*VENVS)
    machine.run("--test")
    (machine.bin / "uv").unlink()
    machine.installer("pip")
    machine.outdated()
    assert into(".venv-django52", machine.run("--test"))[:2] == [
        ".venv-django52/bin/python -m ensurepip --default-pip",
        INSTALL["pip"].format(dir=".venv-django52", args="-e .[django] pytest>=8 Django>=5.2,<6 django-tasks>=0.12"),
    ]


def test_scripts_demo_runs_the_set_up_without_test_extras():
    demo = (ROOT / "scripts" / "demo").read_text()
    assert "scripts/setup-env\n" in demo and "--test" not in demo


def test_scripts_docs_builds_strictly_after_the_docs_set_up():
    docs = (ROOT / "scripts" / "docs").read_text()
    assert "scripts/setup-env --docs\n" in docs and "mkdocs build --strict" in docs
