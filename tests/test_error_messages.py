"""Errors as data: no service message names a CLI flag in its text.

A service error names the fields it concerns as placeholders (``{field:pool}``, ``{set_field:force}``)
and a CLI command as ``{command:...}`` or ``command=``; each front end renders them in its own words
(the CLI as flags, a page as its labels), so no front end rewrites text. This scan reads every
``raise`` in ``workbench/services/`` (and ``core/``, ``store/``) and fails on a message or hint whose string literal has ``--``
followed by a letter (a flag written into the text) outside a ``{command:...}`` placeholder.

Text that is not an error (a job's status message, a note, a result's summary) reaches pages too,
so a second scan reads every string literal of ``core/``, ``services/``, ``llm/`` and ``store/``
(docstrings excluded: they document the CLI for developers) with the same rule. A ``command=``
argument is a CLI command as data (the ``{command}`` placeholder's words), so its flags are the
command's; :data:`ARGV` lists the code that builds a process's argv.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

import workbench.services
from workbench.errors import placeholders

FLAG = re.compile(r"--[A-Za-z]")
SERVICES = pathlib.Path(workbench.services.__file__).parent


def literal_text(node: ast.expr) -> str:
    """The text a message expression writes itself: its string literals, each interpolated value as
    ``X`` (an f-string), ``+`` joined; anything else (a variable, a call) as ``X``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(literal_text(part) if isinstance(part, ast.Constant) else "X" for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return literal_text(node.left) + literal_text(node.right)
    return "X"


def without_commands(text: str) -> str:
    """``text`` without its ``{command:...}`` placeholders: a CLI command is data the front end
    renders (the CLI in backticks, a page as the page that does the same), flags and all."""
    out, at = [], 0
    for part in placeholders(text):
        if part.kind == "command":
            out.append(text[at:part.start])
            at = part.end
    return "".join(out) + text[at:]


def message_literals(call: ast.expr) -> list[str]:
    """The literal text of an exception's message (first argument) and ``hint``."""
    if not isinstance(call, ast.Call):
        return []
    parts = list(call.args[:1]) + [kw.value for kw in call.keywords if kw.arg in ("message", "hint")]
    return [without_commands(literal_text(part)) for part in parts]


def flagged_raises(source: str, name: str = "<source>") -> list[str]:
    """``name:line: literal`` for each raise whose message or hint names a flag."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for text in message_literals(node.exc):
                if FLAG.search(text):
                    found.append(f"{name}:{node.lineno}: {text!r}")
                    break
    return found


@pytest.mark.parametrize("package", ["services", "core", "store"])
def test_no_service_message_names_a_cli_flag(package):
    """Services (and the core and store they raise through) word errors as data."""
    root = SERVICES.parent / package
    files = sorted(root.rglob("*.py"))
    assert len(files) > 10  # the scan reads the real package
    found = [hit for path in files for hit in flagged_raises(path.read_text(), str(path.relative_to(root.parent)))]
    assert found == [], "service errors name CLI flags in their text; use {field:KEY} / {set_field:KEY}:\n" + \
        "\n".join(found)


#: Code whose strings are a process's command line, not text anyone reads: ``path: qualified names``.
ARGV: dict[str, tuple[str, ...]] = {
    # The Judge page's job process reads its request as JSON (services/judge/worker.py): none.
    # Pages start background jobs as ``python -m workbench.services.jobs --db DB --job ID``.
    "services/jobs/launch.py": ("command",),
    "services/jobs/process.py": ("main",),
}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)}


def flagged_strings(source: str, name: str = "<source>", argv: tuple[str, ...] = ()) -> list[str]:
    """``name:line: literal`` for each string literal (an f-string as its literal parts) that names
    a flag, outside docstrings, ``{command:...}`` placeholders, ``command=`` arguments and the
    functions named in ``argv``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = (*scope, node.name)
            if ".".join(scope) in argv:
                return
        if isinstance(node, ast.keyword) and node.arg == "command":
            return
        if id(node) in skip:
            return
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            text = without_commands(literal_text(node))
            if FLAG.search(text):
                found.append(f"{name}:{node.lineno}: {text!r}")
            if isinstance(node, ast.JoinedStr):  # its parts are read above; the values may hold strings too
                for part in node.values:
                    if isinstance(part, ast.FormattedValue):
                        visit(part.value, scope)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, ())
    return found


@pytest.mark.parametrize("package", ["core", "services", "llm", "store"])
def test_no_string_in_package_code_names_a_cli_flag(package):
    """Notes, status messages and summaries name options as fields too (a page shows them)."""
    root = SERVICES.parent / package
    files = sorted(root.rglob("*.py"))
    assert len(files) >= 3  # the scan reads the real package
    found = []
    for path in files:
        relative = str(path.relative_to(root.parent))
        found += flagged_strings(path.read_text(), relative, ARGV.get(relative, ()))
    assert found == [], "package text names CLI flags; use {field:KEY} / {set_field:KEY} / {command:...}:\n" + \
        "\n".join(found)


def test_the_string_scan_finds_a_flag_in_any_text():
    """The companion: notes, f-strings and plain constants are read; docstrings, command data and
    the argv builders are not."""
    source = '''
"""Module doc: `workbench judge --pool P` is fine here."""
NOTE = "raise --budget and run again"


class Report:
    """--force in a docstring is documentation."""

    def summary(self, n):
        notes = [f"{n} grades lowered by --clip"]
        notes.append(f"see {{command:calibrate sample --pool {n}}}")
        return f"{n} rows" + ("; replaced (--force)" if n else "")


def argv(pool):
    return ["--pool", pool]


def hint(path):
    return StoreError("no project", command=f"--db {path} init")
'''
    hits = flagged_strings(source)
    assert sorted(int(hit.split(":")[1]) for hit in hits) == [3, 10, 12, 16]
    assert flagged_strings(source, argv=("argv",)) == [hit for hit in hits if ":16:" not in hit]
    assert flagged_strings('x = f"{y:--<10}"') == []  # a format spec is not text
    assert flagged_strings('x = "range 1--2 or -- 3"') == []  # "--" not before a letter is no flag


def test_the_scan_finds_a_flag_in_a_message():
    """The companion: the same scan flags the forms a flag takes in a message."""
    source = '''
def f(pool, x):
    if x:
        raise InputError(f"no pool {pool!r}; pass --pool NAME")
    if pool:
        raise ConfigError("bad value", field="depth", hint="choose another --depth")
    raise StoreError("pool exists; " + "use --add")
'''
    hits = flagged_raises(source)
    assert sorted(int(hit.split(":")[1]) for hit in hits) == [4, 6, 7]
    clean = '''
def f(pool):
    raise InputError(f"no pool {pool!r}; {{set_field:pool NAME}} (see {{command}})", command="pool --name x")
'''
    assert flagged_raises(clean) == []
    # a flag inside a CLI command placeholder is the command's, not the message's
    assert flagged_raises('raise InputError(f"draw one with {{command:calibrate sample --pool {p}}}")') == []
    assert len(flagged_raises('raise InputError(f"draw one with {{command:x}} --pool {p}")')) == 1
    # "--" not followed by a letter (a value such as 'a--b', a dash) is not a flag
    assert flagged_raises('raise InputError("range 1--2 or -- 3")') == []
