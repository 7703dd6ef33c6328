"""The package's shape: layered subpackages, each importing only from the layers
before it, and every Lua script in a file of its own with a header."""

from __future__ import annotations

import ast
import pkgutil
import re

from helpers import ROOT

import redflow
from redflow.store.scripts import SCRIPTS, script_source

PACKAGE = ROOT / "redflow"
LUA = PACKAGE / "store" / "lua"

#: Layers in order (STYLE.md): a module may import from its own layer and those before it
#: (the bench starts its redis-server with the testing harness). ``contrib`` (framework
#: integrations) is a leaf: see test_nothing_in_redflow_imports_contrib.
LAYERS = ["core", "store", "top", "engine", "ops", "contrib", "testing", "bench"]
TOP_MODULES = {"registry", "client", "client_waits", "client_events", "enqueue_hooks", "handle", "cron", "sync", "__init__"}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "redflow":
        return None
    if len(parts) == 1 or parts[1] in TOP_MODULES:
        return "top"
    return parts[1] if parts[1] in LAYERS else None


def module_name(path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, module)`` of every import not under ``if TYPE_CHECKING:``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append((child.lineno, child.module))
            visit(child)

    visit(tree)
    return found


def test_the_package_lists_its_layers_and_the_user_facing_modules_only():
    names = {m.name for m in pkgutil.iter_modules(redflow.__path__)}
    assert {"core", "store", "engine", "ops", "contrib", "bench", "testing"} <= names
    assert names - {"core", "store", "engine", "ops", "contrib", "bench", "testing"} <= TOP_MODULES
    assert not [n for n in names if n.startswith(("bench_", "testing_"))]


def test_no_module_imports_from_a_layer_after_its_own_except_where_commented():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        own = layer_of(importer)
        lines = path.read_text().splitlines()
        for lineno, imported in runtime_imports(ast.parse(path.read_text())):
            target = layer_of(imported)
            if own is None or target is None or LAYERS.index(target) <= LAYERS.index(own):
                continue
            # The one kind allowed: a deferred import inside a function, said so where it is.
            context = "\n".join(lines[max(0, lineno - 3) : lineno])
            if "upward import" not in context:
                upward.append(f"{importer}:{lineno} imports {imported}")
    assert upward == []


def test_nothing_in_redflow_imports_contrib():
    """An integration's framework (Django) is imported only by those who use it."""
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        if layer_of(importer) == "contrib":
            continue
        importers += [
            f"{importer}:{line}" for line, imported in runtime_imports(ast.parse(path.read_text())) if layer_of(imported) == "contrib"
        ]
    assert importers == []


def test_every_lua_script_is_a_file_with_a_header_and_no_python_string_holds_lua():
    files = {p.stem for p in LUA.glob("*.lua")}
    helpers = {h for needed in SCRIPTS.values() for h in needed}
    assert files == set(SCRIPTS) | helpers
    for name in SCRIPTS:
        header = (LUA / f"{name}.lua").read_text().split("\n\n")[0]
        assert header.startswith(f"-- {name}"), name
        for part in ("KEYS:", "ARGV:", "Returns"):
            assert part in header, f"{name}.lua's header lacks {part}"
        own = (LUA / f"{name}.lua").read_text().splitlines()
        assert [line for line in own if re.search(r"(KEYS|ARGV)\[", line) and not line.startswith("local ")] == [], name
        assert name in script_source(name)
    for helper in helpers:
        assert (LUA / f"{helper}.lua").read_text().startswith("-- Helper"), helper
    lua_in_python = re.compile(r"redis\.call\(")
    assert [p.name for p in PACKAGE.rglob("*.py") if lua_in_python.search(p.read_text())] == []
