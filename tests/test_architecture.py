"""The layout tells the story: each heavy dependency is imported in exactly one layer.

Reads every module of the package with ``ast`` (so lazy imports inside functions count too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from tests.support.prerequisites import REPO

PACKAGE = REPO / "workbench"

# dependency -> the only package path (relative to workbench/) allowed to import it
OWNERS = {
    "duckdb": "store",
    "streamlit": "ui",
    "openai": "llm",
    "tenacity": "llm",
}
CORE_FORBIDDEN = {"duckdb", "openai", "streamlit", "tenacity", "httpx", "workbench.store",
                  "workbench.llm", "workbench.ui", "workbench.services", "workbench.retrieval"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _layer(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0]


def _matches(name: str, dependency: str) -> bool:
    return name == dependency or name.startswith(dependency + ".")


def test_package_has_the_documented_layers():
    for layer in ("core", "store", "llm", "retrieval", "ui", "services"):
        assert (PACKAGE / layer / "__init__.py").is_file(), layer
    assert (PACKAGE / "cli" / "__init__.py").is_file()


@pytest.mark.parametrize("dependency,owner", sorted(OWNERS.items()))
def test_only_the_owning_layer_imports(dependency, owner):
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in _modules()
        if _layer(p) != owner and any(_matches(n, dependency) for n in _imports(p))
    ]
    assert offenders == [], f"{dependency} may only be imported under workbench/{owner}/"


def test_core_is_pure():
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(n for n in _imports(p) if any(_matches(n, f) for f in CORE_FORBIDDEN))
        for p in (PACKAGE / "core").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_checker_sees_lazy_imports(tmp_path):
    # Guard against a checker that cannot fail: an import inside a function must be found.
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    import duckdb\n    from openai import OpenAI\n")
    assert {"duckdb", "openai"} <= _imports(sample)


_SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b",
                  re.DOTALL)  # upper case, as this code writes SQL; prose rarely shouts


def _sql_strings(path: Path) -> list[str]:
    """String constants (f-string parts included) that read like SQL statements."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
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
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
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
