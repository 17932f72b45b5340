"""The layout tells the story: which layer may import which, and who owns each heavy dependency.

Reads every module of the package with ``ast`` (so lazy imports inside functions count too).
Every rule has a companion test that builds a small package violating it and shows the checker
reports the violation, so no rule can pass by seeing nothing.

Layers (a directory or a top-level module of ``workbench/``) and the direction of imports::

    errors, config, version   the foundation every layer may use (config reads files only)
    core                      pure values and functions
    retrieval   -> core       retrievers over in-memory data
    store                     the database (duckdb and SQL live only here)
    llm                       the LLM client (openai/tenacity live only here)
    services    -> core, retrieval, store, llm, resources
    cli, ui, api -> services, retrieval, core  (never store or llm: the UI never opens the
                                               database itself; it asks a service)
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.support.prerequisites import REPO

PACKAGE = REPO / "workbench"

FOUNDATION = {"errors", "config", "version"}
# importing layer -> the other workbench layers it may import. "workbench" is the package root
# (its ``__version__``). A layer missing from this table fails test_every_layer_is_in_the_matrix.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "version": set(),
    "config": {"errors"},
    "resources": set(),
    "lazylibs": set(),  # standard-library and third-party modules imported on first use
    "core": {"errors", "lazylibs"},
    "retrieval": FOUNDATION | {"core", "lazylibs"},
    "store": {"errors", "core", "lazylibs"},
    "llm": FOUNDATION | {"core", "resources", "lazylibs"},
    "services": FOUNDATION | {"core", "retrieval", "store", "llm", "resources", "workbench", "lazylibs"},
    "cli": FOUNDATION | {"core", "retrieval", "services", "workbench", "lazylibs"},
    "ui": FOUNDATION | {"core", "retrieval", "services", "workbench", "lazylibs"},
    # the Python API, like cli and ui; api_lazy holds the modules it imports on first use
    "api": FOUNDATION | {"core", "retrieval", "services", "workbench", "lazylibs", "api_lazy"},
    "api_lazy": FOUNDATION | {"core", "retrieval", "services", "workbench", "lazylibs"},
    "__main__": {"cli"},
    "__init__": {"core", "api", "version"},  # the lazy ``workbench.evaluate`` and ``workbench.Project`` exports
}
LAYERS = sorted(ALLOWED)

# dependency -> the only layer allowed to import it
OWNERS = {
    "duckdb": "store",
    "streamlit": "ui",
    "openai": "llm",
    "tenacity": "llm",
}
# Third-party packages a pure core must not reach for (I/O, network, UI).
CORE_FORBIDDEN = {"duckdb", "openai", "streamlit", "tenacity", "httpx", "requests"}


# --- the checkers ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _parse_cached(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _parse(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per test process while the file is unchanged (the
    package's ~300 modules are read by a dozen checkers; the companion tests' small packages are
    new files, so they are parsed afresh). Checkers only read the tree."""
    stat = path.stat()
    return _parse_cached(path, stat.st_mtime_ns, stat.st_size)


def _imports(path: Path) -> frozenset[str]:
    """Every module name ``path`` imports (lazy imports too), read once per unchanged file."""
    stat = path.stat()
    return _imports_cached(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _imports_cached(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    tree = _parse(path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from workbench import store` names the layer in the alias, not the package root
            # (`from workbench import __version__` names the root)
            layers = [a.name for a in node.names if a.name in ALLOWED] if node.module == "workbench" else []
            names.update(f"workbench.{name}" for name in layers)
            if len(layers) < len(node.names):
                names.add(node.module)
    return frozenset(names)


def _relative_imports(path: Path) -> list[int]:
    tree = _parse(path)
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level > 0]


def _modules(package: Path = PACKAGE) -> list[Path]:
    return sorted(package.rglob("*.py"))


def _layer(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package).parts
    return parts[0] if len(parts) > 1 else Path(parts[0]).stem


def _target(name: str) -> str | None:
    """The workbench layer an imported module name belongs to (None: not ours)."""
    parts = name.split(".")
    if parts[0] != "workbench":
        return None
    return parts[1] if len(parts) > 1 else "workbench"


def _matches(name: str, dependency: str) -> bool:
    return name == dependency or name.startswith(dependency + ".")


def layer_violations(package: Path = PACKAGE) -> dict[str, list[str]]:
    """``{module: [imported workbench modules it may not import]}`` under :data:`ALLOWED`."""
    found = {}
    for path in _modules(package):
        layer = _layer(path, package)
        allowed = ALLOWED.get(layer, set()) | {layer}
        bad = sorted(n for n in _imports(path) if (t := _target(n)) is not None and t not in allowed)
        if bad:
            found[str(path.relative_to(package))] = bad
    return found


def owner_violations(dependency: str, owner: str, package: Path = PACKAGE) -> list[str]:
    return [
        str(p.relative_to(package))
        for p in _modules(package)
        if _layer(p, package) != owner and any(_matches(n, dependency) for n in _imports(p))
    ]


def core_violations(package: Path = PACKAGE) -> dict[str, list[str]]:
    found = {}
    for p in (package / "core").rglob("*.py"):
        bad = sorted(n for n in _imports(p) if any(_matches(n, f) for f in CORE_FORBIDDEN))
        if bad:
            found[str(p.relative_to(package))] = bad
    return found


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / "workbench" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _module_of(layer: str) -> str:
    """Where a sample module of ``layer`` lives in a scratch package."""
    return f"{layer}.py" if layer in {"errors", "config", "version", "__main__", "__init__"} else f"{layer}/sample.py"


# --- the package --------------------------------------------------------------------------------
def test_package_has_the_documented_layers():
    for layer in ("core", "store", "llm", "retrieval", "ui", "services", "cli", "resources"):
        assert (PACKAGE / layer / "__init__.py").is_file(), layer


def test_every_layer_is_in_the_matrix():
    # A new top-level directory or module must be given its place in the direction of imports.
    layers = {_layer(p) for p in _modules()}
    assert layers - set(ALLOWED) == set()


def test_imports_follow_the_layer_matrix():
    assert layer_violations() == {}


def test_the_ui_never_opens_the_database_itself():
    ui = [p for p in _modules() if _layer(p) == "ui"]
    assert ui, "the UI layer has modules"
    offenders = {str(p.relative_to(PACKAGE)): sorted(n for n in _imports(p) if _target(n) == "store" or
                                                     _matches(n, "duckdb")) for p in ui}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_package_code_uses_absolute_imports():
    # The layer checker reads absolute names; a relative import would slip past it.
    offenders = {str(p.relative_to(PACKAGE)): lines for p in _modules() if (lines := _relative_imports(p))}
    assert offenders == {}


@pytest.mark.parametrize("dependency,owner", sorted(OWNERS.items()))
def test_only_the_owning_layer_imports(dependency, owner):
    assert owner_violations(dependency, owner) == [], f"{dependency} may only be imported under workbench/{owner}/"


def test_core_is_pure():
    assert core_violations() == {}


# --- each rule can fail ---------------------------------------------------------------------------
FORBIDDEN_CELLS = [
    (layer, target)
    for layer in LAYERS
    for target in [*LAYERS, "workbench"]
    if target not in ALLOWED[layer] and target != layer and target not in {"__main__", "__init__"}
]


def test_the_matrix_forbids_what_the_issue_names():
    cells = set(FORBIDDEN_CELLS)
    for cell in [("ui", "store"), ("cli", "store"), ("ui", "llm"), ("cli", "llm"), ("core", "store"),
                 ("core", "services"), ("retrieval", "services"), ("services", "cli"), ("services", "ui"),
                 ("store", "services"), ("llm", "store"), ("core", "retrieval"), ("ui", "cli"), ("cli", "ui")]:
        assert cell in cells, cell


@pytest.mark.parametrize("layer,target", FORBIDDEN_CELLS, ids=[f"{a}->{b}" for a, b in FORBIDDEN_CELLS])
def test_each_forbidden_import_is_reported(tmp_path, layer, target):
    # A lazy import inside a function, the shape most likely to slip in.
    module = "workbench" if target == "workbench" else f"workbench.{target}"
    _write(tmp_path, _module_of(layer), f"def f():\n    import {module}\n")
    assert layer_violations(tmp_path / "workbench") == {_module_of(layer): [module]}


def test_allowed_imports_are_not_reported(tmp_path):
    for layer in LAYERS:
        lines = "".join(f"from workbench.{t} import x\n" for t in sorted(ALLOWED[layer]) if t != "workbench")
        _write(tmp_path, _module_of(layer), lines)
    assert layer_violations(tmp_path / "workbench") == {}


def test_from_workbench_import_a_layer_does_not_name_the_root(tmp_path):
    # core may use lazylibs but not the root package (whose exports import the API)
    _write(tmp_path, "core/ok.py", "from workbench import lazylibs\n")
    _write(tmp_path, "core/bad.py", "from workbench import lazylibs, __version__\n")
    assert layer_violations(tmp_path / "workbench") == {"core/bad.py": ["workbench"]}


def test_from_workbench_import_layer_is_seen(tmp_path):
    _write(tmp_path, "ui/page.py", "from workbench import __version__, store\n")
    assert layer_violations(tmp_path / "workbench") == {"ui/page.py": ["workbench.store"]}


def test_the_relative_import_checker_finds_them(tmp_path):
    sample = _write(tmp_path, "ui/page.py", "from ..store import database\n")
    assert _relative_imports(sample) == [1]


@pytest.mark.parametrize("dependency,owner", sorted(OWNERS.items()))
def test_each_owner_rule_is_reported(tmp_path, dependency, owner):
    outsider = "services" if owner != "services" else "cli"
    _write(tmp_path, f"{owner}/ok.py", f"import {dependency}\n")
    _write(tmp_path, f"{outsider}/bad.py", f"def f():\n    from {dependency} import x\n")
    assert owner_violations(dependency, owner, tmp_path / "workbench") == [f"{outsider}/bad.py"]


def test_the_core_purity_rule_is_reported(tmp_path):
    _write(tmp_path, "core/bad.py", "import httpx\n")
    assert core_violations(tmp_path / "workbench") == {"core/bad.py": ["httpx"]}


def test_the_checker_sees_lazy_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    import duckdb\n    from openai import OpenAI\n")
    assert {"duckdb", "openai"} <= _imports(sample)


# --- SQL only in the store; errors raised, not asserted --------------------------------------
_SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b",
                  re.DOTALL)  # upper case, as this code writes SQL; prose rarely shouts


def _sql_strings(path: Path) -> list[str]:
    """String constants (f-string parts included) that read like SQL statements."""
    tree = _parse(path)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings and _SQL.search(node.value)
    ]


def test_sql_lives_only_in_the_store():
    offenders = {
        str(p.relative_to(PACKAGE)): found
        for p in _modules()
        if _layer(p) != "store" and (found := _sql_strings(p))
    }
    assert offenders == {}, "SQL text belongs in workbench/store/"


def test_the_sql_checker_finds_sql(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('def f(cur, t):\n    """SELECT x FROM docs in a docstring is prose."""\n'
                      '    cur.execute(f"UPDATE runs SET level = ? WHERE name = {t}")\n')
    assert len(_sql_strings(sample)) == 1


def _asserts(path: Path) -> list[int]:
    tree = _parse(path)
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]


def test_package_code_raises_instead_of_asserting():
    # `python -O` strips asserts, and an AssertionError tells the user nothing: raise a
    # WorkbenchError that says what was wrong, where and how to fix it.
    offenders = {str(p.relative_to(PACKAGE)): lines for p in _modules() if (lines := _asserts(p))}
    assert offenders == {}


def test_the_assert_checker_finds_asserts(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(x):\n    assert x > 0, 'positive'\n    return x\n")
    assert _asserts(sample) == [2]


# --- no import circles; no private names across modules --------------------------------------------
def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: the package modules it imports}``, lazy imports included; ``from a.b import c``
    names the module ``a.b.c`` when ``c`` is one, else ``a.b`` (the root package too: its lazy
    exports import the API, so a module that reads ``workbench.__version__`` would close a circle;
    the version lives in ``workbench.version``)."""
    modules = {_module_name(p, package): p for p in _modules(package)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    edges.add(sub if sub in modules else node.module)
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def import_circles(package: Path = PACKAGE) -> list[list[str]]:
    """The strongly connected components of :func:`import_graph` with more than one module
    (Tarjan's algorithm, iterative), each sorted, in sorted order."""
    graph = import_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return sorted(circles)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _private(name: str) -> bool:
    return name.startswith("_") and not _dunder(name)


def private_imports(package: Path = PACKAGE) -> dict[str, list[str]]:
    """``{module: [module.name, ...]}``: private names (``_name``, dunders aside) a module takes
    from another package module, by ``from m import _name`` or as ``m._name`` on an imported m."""
    modules = {_module_name(p, package) for p in _modules(package)}
    found = {}
    for path in _modules(package):
        tree = _parse(path)
        bound: dict[str, str] = {}  # local name -> package module it stands for
        bad = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules:  # `import a.b` binds a; `import a.b as m` binds a.b
                        if a.asname:
                            bound[a.asname] = a.name
                        else:
                            bound[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module in modules and node.level == 0:
                for a in node.names:
                    if f"{node.module}.{a.name}" in modules:
                        bound[a.asname or a.name] = f"{node.module}.{a.name}"
                    elif _private(a.name):
                        bad.add(f"{node.module}.{a.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                base = node.value
                dotted = []
                while isinstance(base, ast.Attribute):
                    dotted.append(base.attr)
                    base = base.value
                if isinstance(base, ast.Name) and base.id in bound:
                    target = ".".join([bound[base.id], *reversed(dotted)])
                    if target in modules:
                        bad.add(f"{target}.{node.attr}")
        if bad:
            found[str(path.relative_to(package))] = sorted(bad)
    return found


def test_there_are_no_import_circles():
    # A circle makes import order matter and hides which concept depends on which: move the
    # shared piece to the module both sides may import.
    assert import_circles() == []


def test_no_private_name_is_imported_from_another_module():
    # Shared means public: rename it at its definition (and every use) instead.
    assert private_imports() == {}


def test_the_circle_checker_finds_circles(tmp_path):
    _write(tmp_path, "services/a.py", "from workbench.services.b import x\n")
    _write(tmp_path, "services/b.py", "def f():\n    from workbench.services import c\n")  # lazy, a module
    _write(tmp_path, "services/c.py", "import workbench.services.a\n")
    _write(tmp_path, "store/d.py", "from workbench.store.e import y\n")
    _write(tmp_path, "store/e.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from workbench.store.d import z\n")
    _write(tmp_path, "core/f.py", "from workbench.services.a import x\n")  # reaches a circle, not in one
    _write(tmp_path, "__init__.py", "def __getattr__(name):\n    from workbench.api import Api\n")
    _write(tmp_path, "api.py", "from workbench import __version__\nfrom workbench.core import f\n")
    assert import_circles(tmp_path / "workbench") == [
        ["workbench", "workbench.api"],  # the root's lazy export and the API reading the root's version
        ["workbench.services.a", "workbench.services.b", "workbench.services.c"],
        ["workbench.store.d", "workbench.store.e"],
    ]


def test_the_circle_checker_accepts_a_tree(tmp_path):
    _write(tmp_path, "services/__init__.py", "")
    _write(tmp_path, "services/a.py", "from workbench.services import b\nfrom workbench.core.c import x\n")
    _write(tmp_path, "services/b.py", "from workbench.core.c import x\n")
    _write(tmp_path, "core/c.py", "import os\n")
    _write(tmp_path, "__init__.py", "def __getattr__(name):\n    from workbench.services.a import Api\n")
    _write(tmp_path, "version.py", "__version__ = '1'\n")
    _write(tmp_path, "services/c.py", "from workbench.version import __version__\n")
    assert import_circles(tmp_path / "workbench") == []


def test_the_private_import_checker_finds_them(tmp_path):
    _write(tmp_path, "services/__init__.py", "")
    _write(tmp_path, "services/a.py", "_hidden = 1\n__all__ = []\n")
    _write(tmp_path, "services/b.py", "def f():\n    from workbench.services.a import _hidden, __all__\n")
    _write(tmp_path, "services/c.py", "from workbench.services import a\nimport workbench.services.a\n"
                                      "y = a._hidden + workbench.services.a._other + a.__all__\n")
    _write(tmp_path, "services/d.py", "from workbench.services import _private_module\n")
    _write(tmp_path, "services/_private_module.py", "def _own():\n    return _own\n")
    assert private_imports(tmp_path / "workbench") == {
        "services/b.py": ["workbench.services.a._hidden"],
        "services/c.py": ["workbench.services.a._hidden", "workbench.services.a._other"],
    }


# --- services subpackages depend one way ---------------------------------------------------------
# A unit of services is a subpackage (``services/calibration/``) or a top-level module
# (``services/browse.py``). Two units that import each other, at any depth and inside functions
# too, are one concept split in two or a shared piece in the wrong place: whichever imports
# first, the other cannot be understood, tested or moved without it. Move the shared piece to the
# lower unit or to a neutral module both may import.
def service_unit(module: str) -> str | None:
    """``workbench.services.X`` for a module of the subpackage X or the top-level module X; None
    outside services (and for ``workbench.services`` itself)."""
    parts = module.split(".")
    if parts[:2] != ["workbench", "services"] or len(parts) < 3:
        return None
    return ".".join(parts[:3])


def service_dependencies(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """``{(unit, other unit): ["module -> module", ...]}``: the imports from one services unit into
    another, from a module graph (:func:`import_graph`)."""
    found: dict[tuple[str, str], list[str]] = {}
    for module in sorted(graph):
        src = service_unit(module)
        for target in sorted(graph[module]):
            dst = service_unit(target)
            if src is not None and dst is not None and dst != src:
                found.setdefault((src, dst), []).append(f"{module} -> {target}")
    return found


def two_way_services(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """``{(a, b): the imports both ways}`` for every pair of services units that import each other
    (``a`` < ``b``); empty when every dependency between units goes one way."""
    edges = service_dependencies(graph)
    return {(a, b): edges[(a, b)] + edges[(b, a)] for a, b in sorted(edges) if a < b and (b, a) in edges}


def test_services_subpackages_depend_one_way():
    assert two_way_services(import_graph()) == {}


def test_the_two_way_checker_finds_a_synthetic_two_way_pair():
    graph = {
        "workbench.services.a.x": {"workbench.services.b.y", "workbench.core.z"},
        "workbench.services.b.y": {"workbench.store.t"},
        "workbench.services.b.w": {"workbench.services.a"},  # the other way, through another module
        "workbench.services.a.v": {"workbench.services.a.x"},  # inside one unit: not a dependency
        "workbench.services.c": {"workbench.services.a.x"},  # one way only
        "workbench.services": {"workbench.services.a", "workbench.services.c"},  # the root is no unit
        "workbench.cli.m": {"workbench.services.a.x"},  # outside services: the layer matrix's business
        "workbench.services.c.u": {"workbench.cli.m"},
    }
    assert two_way_services(graph) == {
        ("workbench.services.a", "workbench.services.b"): [
            "workbench.services.a.x -> workbench.services.b.y", "workbench.services.b.w -> workbench.services.a"],
    }
    del graph["workbench.services.b.w"]
    assert two_way_services(graph) == {}


def test_the_two_way_checker_sees_lazy_imports_in_a_package(tmp_path):
    _write(tmp_path, "services/__init__.py", "")
    _write(tmp_path, "services/browse.py", "def tags():\n    from workbench.services.pool.pools import p\n")
    _write(tmp_path, "services/pool/__init__.py", "")
    _write(tmp_path, "services/pool/pools.py", "def p():\n    from workbench.services import browse\n")
    _write(tmp_path, "services/judge/__init__.py", "")
    _write(tmp_path, "services/judge/jobs.py", "from workbench.services.pool import pools\n")
    assert list(two_way_services(import_graph(tmp_path / "workbench"))) == [
        ("workbench.services.browse", "workbench.services.pool")]


# --- core touches files only in its named readers ---------------------------------------------
# core is values and functions; the one exception is the qrels and run file readers (the public
# ``workbench.evaluate`` takes paths). Every other core module works on what it is given.
CORE_FILE_READERS = {"core/metrics/readers.py"}
_FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "stat", "lstat", "exists",
               "is_file", "is_dir", "iterdir", "glob", "rglob", "unlink", "mkdir", "rmdir", "touch",
               "read_csv", "read_json", "read_parquet", "read_table", "load", "fromfile", "save", "savez",
               "to_csv", "to_parquet"}
_FILE_MODULES = {"os", "shutil", "tempfile", "subprocess", "socket", "io"}


def _file_access(path: Path) -> list[int]:
    """Lines that call ``open``, a file method of a path (``read_text``, ``open``, ``stat``, ...),
    a file reader or writer (``read_csv``, ``np.load``, ``to_parquet``) or anything of ``os``,
    ``shutil``, ``tempfile``, ``subprocess``, ``socket`` or ``io``."""
    tree = _parse(path)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Name) and f.id == "open") or (isinstance(f, ast.Attribute) and (
                f.attr in _FILE_CALLS or (isinstance(f.value, ast.Name) and f.value.id in _FILE_MODULES))):
            lines.append(node.lineno)
    return sorted(lines)


def core_file_access(package: Path = PACKAGE) -> dict[str, list[int]]:
    found = {}
    for p in sorted((package / "core").rglob("*.py")):
        name = str(p.relative_to(package))
        if name not in CORE_FILE_READERS and (lines := _file_access(p)):
            found[name] = lines
    return found


def test_core_touches_files_only_in_its_readers():
    assert core_file_access() == {}, f"only {sorted(CORE_FILE_READERS)} in core may read files"
    assert all((PACKAGE / name).is_file() for name in CORE_FILE_READERS)


def test_the_core_file_checker_finds_file_access(tmp_path):
    _write(tmp_path, "core/metrics/readers.py", "def f(p):\n    return open(p).read()\n")  # the exception
    _write(tmp_path, "core/bad.py", "import os\nfrom pathlib import Path\n"
                                    "def f(p):\n    return Path(p).read_text()\n"
                                    "def g(p):\n    with open(p) as fh:\n        return fh\n"
                                    "def h(p):\n    return os.listdir(p)\n")
    _write(tmp_path, "core/good.py", "def f(text):\n    return text.replace('a', 'b').split()\n")
    assert core_file_access(tmp_path / "workbench") == {"core/bad.py": [4, 6, 9]}


# --- front ends start no processes -----------------------------------------------------------------
# A job the app starts (the judge) is launched by a service (services/judge/launch.py), so the
# page and the CLI share one way to start, follow and stop it.
PROCESS_MODULES = ("subprocess", "multiprocessing")


def process_violations(package: Path = PACKAGE) -> dict[str, list[str]]:
    return {str(p.relative_to(package)): bad for p in _modules(package)
            if _layer(p, package) in {"ui", "cli", "api"}
            and (bad := sorted(n for n in _imports(p) if any(_matches(n, m) for m in PROCESS_MODULES)))}


def test_front_ends_start_no_processes():
    assert process_violations() == {}


def test_the_process_rule_is_reported(tmp_path):
    _write(tmp_path, "ui/page.py", "def f():\n    import subprocess\n")
    _write(tmp_path, "services/launch.py", "import subprocess\n")
    assert process_violations(tmp_path / "workbench") == {"ui/page.py": ["subprocess"]}


# --- start-up-cost imports live in one lazy module per layer -----------------------------------------
# `workbench --help` and `import workbench.api` stay cheap because the modules they do not need yet
# are imported on first use. That happens in these modules (a PEP 562 module __getattr__ over a
# table), not in import statements scattered through function bodies.
LAZY_MODULES = ("lazylibs.py", "cli/lazy.py", "api_lazy.py", "services/lazy.py")
# layer -> the imports inside functions it may still have. services: imports of other services
# modules, which services/lazy.py cannot hold (a listed module reading it back would close an
# import circle, test_there_are_no_import_circles, and a services-wide table would tie the
# subpackages both ways, test_services_subpackages_depend_one_way). The others: the metric engine
# core/judging/budget.py defers, the duckdb and streamlit imports their owners defer (lazylibs may
# not hold an owned library), four service and page modules the app's pages defer, and
# workbench/__init__.py's own PEP 562 exports.
FUNCTION_IMPORTS_ALLOWED = {"services": 31, "core": 1, "ui": 5, "store": 1, "__init__": 2}


def function_imports(package: Path = PACKAGE) -> dict[str, list[str]]:
    """``{layer: ["path:line", ...]}``: the import statements inside a function body (at any depth),
    outside :data:`LAZY_MODULES`."""
    found: dict[str, list[str]] = {}
    for path in _modules(package):
        name = path.relative_to(package).as_posix()
        if name in LAZY_MODULES:
            continue
        for fn in ast.walk(_parse(path)):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        found.setdefault(_layer(path, package), []).append(f"{name}:{node.lineno}")
    # an import in a nested function is inside two functions: count it once
    return {layer: sorted(set(places)) for layer, places in found.items()}


def test_in_function_imports_stay_within_each_layers_allowance():
    counts = {layer: len(places) for layer, places in function_imports().items()}
    over = {layer: n for layer, n in counts.items() if n > FUNCTION_IMPORTS_ALLOWED.get(layer, 0)}
    assert over == {}, f"move start-up-cost imports into one of {LAZY_MODULES} (counts over the allowance)"


def test_the_function_import_counter_finds_them(tmp_path):
    _write(tmp_path, "cli/lazy.py", "def __getattr__(name):\n    import importlib\n")  # the exception
    _write(tmp_path, "cli/cmd.py", "import os\ndef f():\n    import json\n    def g():\n"
                                   "        from workbench.services import x\n    return g\n")
    _write(tmp_path, "core/m.py", "class C:\n    def f(self):\n        import numpy\n")
    assert function_imports(tmp_path / "workbench") == {"cli": ["cli/cmd.py:3", "cli/cmd.py:5"],
                                                        "core": ["core/m.py:3"]}


def lazy_table_mismatches(path: Path) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """``(typed, table)``: the ``(attribute, module)`` pairs only the ``TYPE_CHECKING`` imports of a
    lazy module name, and those only its ``MODULES`` table names (both empty when they agree). The
    imports are what type checkers and this file's checkers read; the table is what runs."""
    typed, table = set(), set()
    for node in _parse(path).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.Import):
                    typed.update((a.asname or a.name, a.name) for a in imp.names)
                elif isinstance(imp, ast.ImportFrom):
                    typed.update((a.asname or a.name, f"{imp.module}.{a.name}") for a in imp.names)
        elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["MODULES"]:
            table.update(ast.literal_eval(node.value).items())
    return typed - table, table - typed


@pytest.mark.parametrize("name", LAZY_MODULES)
def test_each_lazy_module_types_what_it_imports(name):
    assert (PACKAGE / name).is_file()
    assert lazy_table_mismatches(PACKAGE / name) == (set(), set())


def test_the_lazy_table_checker_finds_a_mismatch(tmp_path):
    path = _write(tmp_path, "lazylibs.py", "if TYPE_CHECKING:\n    import numpy as numpy\n"
                                           "    from scipy import sparse as scipy_sparse\n"
                                           "MODULES = {'numpy': 'numpy', 'pandas': 'pandas'}\n")
    assert lazy_table_mismatches(path) == ({("scipy_sparse", "scipy.sparse")}, {("pandas", "pandas")})
