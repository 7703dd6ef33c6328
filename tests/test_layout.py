"""The package's shape: layered subpackages, each importing only from the layers
before it, and every Lua script in a file of its own with a header."""

from __future__ import annotations

import ast
import pkgutil
import re

import pytest
from helpers import ROOT

import redflow
from redflow.store import catalog
from redflow.store.catalog import SCRIPTS, script_source

PACKAGE = ROOT / "redflow"
LUA = PACKAGE / "store" / "lua"

#: Layers in order (STYLE.md): a module may import from its own layer and those before it
#: (the bench starts its redis-server with the testing harness). ``contrib`` (framework
#: integrations) is a leaf: see test_nothing_in_redflow_imports_contrib.
LAYERS = ["core", "store", "top", "engine", "ops", "contrib", "testing", "bench"]
TOP_MODULES = {"registry", "client", "handle", "sync", "__init__"}
#: The longest a module may be (STYLE.md aims at ~400), and the client (the public API only).
MAX_MODULE_LINES = 450
MAX_CLIENT_LINES = 400


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


def undeclared_helpers() -> dict[str, list[str]]:
    """Lua file -> the helpers whose functions or constants it uses without its
    header declaring them (directly, or through a helper it declares)."""
    defined = {}  # helper function or constant -> its file
    for helper in catalog.HELPER_ORDER:
        for function, constant in re.findall(r"^local (?:function (\w+)|([A-Z_]+) =)", catalog.lua(helper), re.M):
            defined[function or constant] = helper
    missing = {}
    for name in [*catalog.SCRIPT_NAMES, *catalog.HELPER_ORDER]:
        source = re.sub(r"--.*$", "", catalog.lua(name), flags=re.M)  # code only: comments may name anything
        own = set(re.findall(r"^local function (\w+)", source, re.M))
        used = {defined[word] for word in re.findall(r"\b\w+\b", source) if word in defined and word not in own} - {name}
        if used - set(catalog.helpers_of(name)):
            missing[name] = sorted(used - set(catalog.helpers_of(name)))
    return missing


def test_a_lua_files_header_declares_every_helper_it_uses():
    """A header's ``(needs a.lua, ...)`` is the one declaration of a file's dependencies
    (store/catalog.py derives the library's from it)."""
    assert undeclared_helpers() == {}


def test_the_header_check_finds_a_helper_used_but_not_declared(monkeypatch):
    real = catalog.lua
    monkeypatch.setattr(catalog, "lua", lambda name: real(name).replace("owns.lua, ", "") if name == "save_step" else real(name))
    assert undeclared_helpers() == {"save_step": ["owns"]}


def test_no_module_is_longer_than_the_style_allows():
    lengths = {module_name(path): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES} == {}
    assert lengths["redflow.client"] < MAX_CLIENT_LINES


# -- the import graph --------------------------------------------------------------------
#
# Edges are the modules a file names in an import statement, wherever it stands:
# at the top, deferred into a function, or under ``if TYPE_CHECKING:`` (those
# never run, but a module that needs another's types and is needed by it back is
# the coupling issue 29 undoes; ``import_graph(type_checking=False)`` leaves them
# out). Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those
# implicit edges to parent packages are left out (a package re-exporting its
# modules would otherwise be a circle with each of them).

#: The packages checked for circles and for calls into other modules' underscore names: all of redflow/.
CHECKED_PACKAGES = ["redflow"]


def package_modules() -> dict[str, ast.Module]:
    """Every module of redflow/ by dotted name, parsed."""
    return {module_name(path): ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


def from_base(importer: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from ... import`` reads from (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    package = importer if is_package(importer) else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def resolved(importer: str, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The modules of redflow/ that ``node`` (in ``importer``) names: ``from a import b``
    names the module ``a.b`` if there is one, else ``a``."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = from_base(importer, node)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = []
    for name in names:
        while name and name not in known:  # `import redflow.ops.cli.x` of a name inside a module
            name = name.rpartition(".")[0]
        if name and name != importer:
            found.append(name)
    return found


def import_graph(*, type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of redflow/ it imports (see the note above)."""
    trees = package_modules()
    known = set(trees)
    graph: dict[str, set[str]] = {}
    for importer, tree in trees.items():
        edges: set[str] = set()

        def visit(node: ast.AST, importer: str = importer, edges: set[str] = edges) -> None:
            for child in ast.iter_child_nodes(node):
                if not type_checking and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for sub in child.orelse:
                        visit(sub)
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    edges.update(resolved(importer, child, known))
                visit(child)

        visit(tree)
        graph[importer] = edges
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one module: its circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return circles


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_strongly_connected_finds_circles_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set(), "f": {"f"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", CHECKED_PACKAGES)
def test_no_module_imports_one_that_imports_it_back(package):
    circles = [circle for circle in strongly_connected(import_graph()) if any(within(m, package) for m in circle)]
    assert circles == []


def underscore_calls(importer: str, tree: ast.Module, known: set[str]) -> list[str]:
    """Where ``importer`` names another module's underscore name: ``from m import _x``,
    or ``m._x`` where ``m`` is a module of redflow/ it imported (dunder names are public)."""

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    found = []
    modules: dict[str, str] = {}  # local name -> module of redflow/
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = from_base(importer, node)
            for alias in node.names:
                if private(alias.name) and base.startswith("redflow"):
                    found.append(f"{importer}:{node.lineno} imports {alias.name} from {base}")
                elif f"{base}.{alias.name}" in known:
                    modules[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            owner = modules.get(ast.unparse(node.value))
            if owner is not None and owner != importer:
                found.append(f"{importer}:{node.lineno} uses {owner}.{node.attr}")
    return found


def test_underscore_calls_finds_imported_and_attribute_uses_of_private_names():
    known = {"redflow.ops.format", "redflow.ops.cli", "redflow.ops.cli.runs", "redflow.core.codec"}
    source = (
        "import redflow.core.codec\n"
        "from redflow.ops import format\n"
        "from redflow.ops.cli import runs as commands\n"
        "from redflow.core.codec import _offender, dumps\n"
        "format._private(1); commands._confirm(''); redflow.core.codec._walk; format.__name__; other._fine\n"
    )
    assert sorted(underscore_calls("redflow.ops.x", ast.parse(source), known)) == [
        "redflow.ops.x:4 imports _offender from redflow.core.codec",
        "redflow.ops.x:5 uses redflow.core.codec._walk",
        "redflow.ops.x:5 uses redflow.ops.cli.runs._confirm",
        "redflow.ops.x:5 uses redflow.ops.format._private",
    ]


#: Underscore names of other libraries that redflow reads, each for a reason of its own
#: (the check below would take them for a redflow module's when redflow has a name alike).
THIRD_PARTY_PRIVATES = {
    "_actions": "argparse: the options a parser was given, to document them",
    "_sock": "redis-py's Connection: the socket a slot connection reads replies from",
}


def private_names(tree: ast.Module) -> set[str]:
    """The underscore names a module defines: functions, classes, attributes and variables it assigns, slots."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.add(node.value)  # __slots__
    return {name for name in found if name.startswith("_") and not name.endswith("__")}


def private_attribute_uses(importer: str, tree: ast.Module, defined: dict[str, set[str]]) -> list[str]:
    """Where ``importer`` reads ``obj._x`` (``obj`` not ``self`` / ``cls``) for an
    underscore name another module of redflow/ defines and this one does not: a
    call into a host's private methods, which passing values replaces."""
    own = defined[importer]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.endswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        owners = sorted(module for module, names in defined.items() if node.attr in names and module != importer)
        if node.attr not in own and owners and node.attr not in THIRD_PARTY_PRIVATES:
            found.append(f"{importer}:{node.lineno} uses {ast.unparse(node)} ({owners[0]}'s)")
    return found


def test_private_attribute_uses_finds_a_call_into_a_hosts_private_method():
    host = ast.parse("class Client:\n    def _enqueue(self):\n        self._cache = 1\n")
    user = ast.parse("def fan_out(client, other):\n    client._enqueue(); other._exit(); client._cache\n")
    defined = {"redflow.client": private_names(host), "redflow.events": private_names(user)}
    assert sorted(private_attribute_uses("redflow.events", user, defined)) == [
        "redflow.events:2 uses client._cache (redflow.client's)",
        "redflow.events:2 uses client._enqueue (redflow.client's)",
    ]


@pytest.mark.parametrize("package", CHECKED_PACKAGES)
def test_no_module_uses_another_modules_underscore_names(package):
    trees = package_modules()
    defined = {name: private_names(tree) for name, tree in trees.items()}
    found = [
        hit
        for name, tree in trees.items()
        if within(name, package)
        for hit in [*underscore_calls(name, tree, set(trees)), *private_attribute_uses(name, tree, defined)]
    ]
    assert found == []


# -- the layout page -------------------------------------------------------------------

LAYOUT_PAGE = ROOT / "docs" / "code-layout.md"


def test_the_layout_page_names_every_module_and_draws_the_layers_in_order():
    """docs/code-layout.md lists every module (as `name`, or a package as `name/`)
    and its drawing stacks the layers as LAYERS orders them, the last on top."""
    page = LAYOUT_PAGE.read_text()
    named = {part for token in re.findall(r"`([\w/.]+)`", page) for part in token.split("/")}
    modules = {module_name(path).rpartition(".")[2] for path in PACKAGE.rglob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in PACKAGE.rglob("__init__.py")} - {"redflow"}
    assert sorted((modules | packages) - named) == []
    drawing = page.split("```text\n")[1].split("```")[0]
    rows = [first for line in drawing.splitlines() if line.strip() for first in [line.split()[0].rstrip("/")] if first in LAYERS]
    assert rows == ["ops", "engine", "top", "store", "core"]
    assert [layer for layer in reversed(LAYERS) if layer in rows] == rows
