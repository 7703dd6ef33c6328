"""Promise 9: security.

A Redis that requires a password, or an ACL user confined to the prefix,
works from the URL alone (worker and client); a wrong password is a clear
error. Queue data is never unpickled or evaluated: a pickle payload (with a
``__reduce__`` that would leave a marker file) is rejected as bad JSON, and
the package's source never imports a deserializer of code nor calls
``eval``/``exec``.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest
import redis
from helpers import ROOT, wait_until

from redflow import create_client
from tests.chaos.apps.crash_app import registry as crash_registry
from tests.chaos.harness import BINARY_ENTRY, alive, new_run_id, pickle_input_is_rejected_as_bad_json, write_run

PASSWORD = "s3cret-pa55"


def auth_url(port: int, user: str = "", password: str = PASSWORD) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{port}/0"


def run_journeys_through(url: str, prefix: str, workers) -> list[dict]:
    worker = workers.spawn(url)
    client = create_client(url, prefix=prefix, registry=crash_registry)
    try:
        outputs = [h.result(timeout=30) for h in client.run_many("journey", [{}] * 5)]
    finally:
        client.close()
    assert all(output["pid"] == worker.proc.pid for output in outputs)
    return outputs


@pytest.mark.engine(extra_args=("--requirepass", PASSWORD))
def test_a_redis_requiring_a_password_works_from_the_url_and_a_wrong_password_is_a_clear_error(engine, prefix, workers):
    assert len(run_journeys_through(auth_url(engine.port), prefix, workers)) == 5

    anonymous = create_client(engine.url, prefix=prefix, registry=crash_registry)
    with pytest.raises(redis.AuthenticationError):
        anonymous.run("journey", {})
    anonymous.close()
    wrong = workers.spawn(auth_url(engine.port, password="not-it"), ready=False)
    assert wrong.wait(timeout=30) != 0
    assert "AuthenticationError" in wrong.output() and "invalid username-password pair" in wrong.output()


def test_an_acl_user_confined_to_its_prefix_and_denied_dangerous_commands_runs_workflows_from_the_url(engine_factory, prefix, workers):
    rules = ("on", f">{PASSWORD}", f"~{prefix}:*", "resetchannels", "+@all", "-@dangerous")
    engine = engine_factory(extra_args=("--user", "default", "off", "--user", "alice", *rules))
    assert len(run_journeys_through(auth_url(engine.port, user="alice"), prefix, workers)) == 5

    alice = redis.Redis.from_url(auth_url(engine.port, user="alice"), decode_responses=True)
    with pytest.raises(redis.exceptions.NoPermissionError):
        alice.set("elsewhere:key", "1")  # the confinement is real
    alice.close()


@pytest.mark.parametrize("protocol", [0, pickle.HIGHEST_PROTOCOL], ids=["protocol-0-ascii", "highest-protocol-binary"])
def test_a_pickle_payload_as_run_input_is_rejected_as_bad_json_and_never_unpickled(engine, workers, chaos_client, protocol):
    worker = workers.spawn(engine.url, app="bad_app")
    pickle_input_is_rejected_as_bad_json(engine.url, chaos_client.keys, protocol=protocol)
    assert alive(worker)


def test_a_binary_queue_entry_stops_neither_the_worker_nor_its_crash_recovery(engine, workers, chaos_client):
    worker = workers.spawn(engine.url, app="bad_app")
    keys = chaos_client.keys
    with redis.Redis.from_url(engine.url) as raw:  # bytes in, byte for byte
        raw.lpush(keys.queue_ready("default"), BINARY_ENTRY)
        orphan = write_run(raw, keys, new_run_id(), into="processing")  # as a worker that died after claiming it
        wait_until(lambda: raw.hget(keys.run(orphan), "status") == b"succeeded", timeout=30,
                   message="the reaper to recover the run a dead worker left in processing")  # fmt: skip
    assert alive(worker)
    assert chaos_client.run("echo", {}).result(timeout=30)["pid"] == worker.proc.pid  # known from the synced metadata


# -- the source --------------------------------------------------------------------------

#: Modules that turn bytes into objects or code.
DESERIALIZERS = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle", "yaml", "copyreg"}
EVALUATORS = {"eval", "exec", "compile", "__import__"}


#: The modules that import a module by a name they compute, and why that name is safe.
COMPUTED_IMPORTS = {
    "redflow/__init__.py": "the lazy public names, from its own table",
    "redflow/ops/cli/parser.py": "the CLI's command modules, from COMMAND_MODULES",
    "redflow/ops/cli/worker.py": "the app the operator names with -A (as Celery's -A)",
    "redflow/contrib/django/apps.py": "the Django checks module, a constant",
}


def redflow_sources() -> list[Path]:
    return sorted((ROOT / "redflow").rglob("*.py"))


def test_redflow_never_imports_a_deserializer_of_objects_nor_evaluates_code():
    found = []
    for path in redflow_sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module.split(".")[0]]
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n in DESERIALIZERS]
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if called in EVALUATORS and not (isinstance(func, ast.Attribute) and called == "compile"):
                    found.append(f"{path.name}:{node.lineno} calls {called}()")
                if called == "import_module" and str(path.relative_to(ROOT)) not in COMPUTED_IMPORTS:
                    found.append(f"{path.name}:{node.lineno} imports a module by a computed name")
    assert len(redflow_sources()) > 10 and found == []


def lua_scripts() -> dict[str, str]:
    """Every Lua script redflow runs, with its helpers (redflow/store/lua/*.lua)."""
    from redflow.store.catalog import SCRIPTS, script_source

    return {name: script_source(name) for name in SCRIPTS}


def test_redflow_lua_scripts_never_load_code_and_json_is_decoded_by_orjson_only():
    scripts = lua_scripts()
    loaders = re.compile(r"\b(loadstring|load|dofile|loadfile|require)\s*\(")
    assert len(scripts) >= 10 and {name: loaders.findall(lua) for name, lua in scripts.items() if loaders.search(lua)} == {}
    stdlib_json = re.compile(r"\b(json|simplejson|ujson)\.loads?\(")
    json_decoders = [f"{p.name}: {m.group(0)}" for p in redflow_sources() for m in stdlib_json.finditer(p.read_text())]
    assert json_decoders == []
    assert "orjson.loads(raw)" in (ROOT / "redflow" / "core" / "codec.py").read_text()
