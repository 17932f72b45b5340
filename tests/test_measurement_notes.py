"""No measurement logs in the code's docstrings and comments (issue 33).

A docstring gives the formula, the edge cases and the reason; a comment says why. Timings, memory
figures and speed-ups measured once on some machine go to docs/performance.md (dated, with the
conditions) or come from a script in benchmarks/, where they can be measured again. This test
reads every docstring (module, class, function) and every comment under workbench/ and fails on
a figure with a unit of time or memory, or a speed-up, that :data:`ALLOWED` does not list as a
setting, a bound or a target.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

WORKBENCH = Path(__file__).resolve().parent.parent / "workbench"

#: A number (or a range such as ``110-160``) with a unit of time or memory, or a speed-up
#: (``4x faster``, ``1.75× faster``). ``2×2`` (a matrix) and ``429s`` (HTTP statuses) are not.
MEASUREMENT = re.compile(
    r"(?<![\w.])\d+(?:[.,]\d+)?(?:\s?[-–]\s?\d+(?:\.\d+)?)?"
    r"(?:\s?(?:ms|MB|GB|KB|×|x faster|x slower)|\s(?:s|seconds|min|minutes))(?![\w²])"
)

#: Figures that are not measurements, by file: each entry is a phrase of a docstring or comment
#: (whitespace as one space) that holds the figure, with why it stays.
ALLOWED: dict[str, dict[str, str]] = {
    "cli/common.py": {"in well under 0.3 s": "a target for `workbench --help`, not a measurement"},
    "core/metrics/significance.py": {"2M cells (~16 MB)": "arithmetic: 2M float64 cells"},
    "errors.py": {"an id of 50 MB must not make a 50 MB line": "an example size"},
    "llm/client.py": {"a 20 ms ticker": "the ticker's period, a setting"},
    "retrieval/dense.py": {"stays below ~64 MB": "the bound the query blocks are sized for"},
    "services/access.py": {"(5 failures: wait 30 s; 6: 60 s; 7: 120 s; ... at most 15 min)": "the lock-out schedule"},
    "services/calibration/pending.py": {"at most 5 s)": "the retry interval's cap",
                                        "(at most every 5 s)": "the retry interval's cap"},
    "services/judge/jobs.py": {"it waits up to 5 s for the requests": "the stop's grace period",
                               "12 s`` (``1 per 2.5 s`` under ten seconds)": "the progress line's format"},
    "services/judge/spec.py": {"at most 900 s": "the timeout's cap"},
    "services/sessions.py": {"lives 60 s": "the ticket's lifetime"},
    "ui/views/label.py": {"``[calibration] min_visible_ms`` (300 ms)": "a setting's default",
                          "within 150 ms of a key press at p95": "the speed target"},
}


def notes(source: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of every comment and docstring of a module's source."""
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                found.append((doc.value.lineno, doc.value.value))
    return found


def measurement_logs(source: str, allowed: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """``(line, figure, context)`` of each figure in ``source``'s docstrings and comments that no
    phrase of ``allowed`` covers (a phrase covers a figure it contains, where it occurs)."""
    out = []
    for line, text in notes(source):
        flat = " ".join(text.split())
        spans = [(m.start(), m.end()) for phrase in (allowed or {}) for m in re.finditer(re.escape(phrase), flat)]
        for m in MEASUREMENT.finditer(flat):
            if any(lo <= m.start() and m.end() <= hi for lo, hi in spans):
                continue
            out.append((line, m.group(0), flat[max(0, m.start() - 60):m.end() + 30]))
    return out


def _sources() -> list[tuple[str, str]]:
    return [(path.relative_to(WORKBENCH).as_posix(), path.read_text(encoding="utf-8"))
            for path in sorted(WORKBENCH.rglob("*.py"))]


def test_no_measurement_logs_in_docstrings_or_comments():
    found = [f"workbench/{name}:{line}: {figure!r} in ...{context}..."
             for name, source in _sources()
             for line, figure, context in measurement_logs(source, ALLOWED.get(name))]
    assert not found, ("measurement logs in docstrings or comments; move each figure to docs/performance.md "
                       "(or leave it to the benchmark that prints it) and keep the why:\n" + "\n".join(found))


def test_every_allowed_phrase_is_still_there():
    sources = dict(_sources())
    stale = [f"{name}: {phrase!r}" for name, phrases in ALLOWED.items() for phrase in phrases
             if name not in sources or not any(phrase in " ".join(text.split()) for _, text in notes(sources[name]))]
    assert not stale, "ALLOWED lists phrases no docstring or comment holds any more:\n" + "\n".join(stale)


def test_the_check_finds_measurement_logs_and_passes_the_rest():
    source = '''"""Visits cost less (measured on the demo project: 17 ms and
8 ms of CPU per visit, against 110-160
ms with the check)."""

LIMIT = "5 s"  # many small sorts that stay in cache, ~4x faster than one sort


def f():
    """Imports pandas: +40 MB of memory; the fp32 encoder is 1.75× faster; a 3.5 GB peak.

    The collapsed 2×2 matrix; the share of 429s; 0.5 seconds."""
    help_text = "wait 30 s"  # a string, not a docstring or a comment
    return help_text  # the ticket lives 60 s
'''
    figures = [figure for _, figure, _ in measurement_logs(source)]
    assert figures == ["4x faster", "60 s", "17 ms", "8 ms", "110-160 ms", "40 MB", "1.75×", "3.5 GB",
                       "0.5 seconds"]
    assert [figure for _, figure, _ in measurement_logs(source, {"the ticket lives 60 s": "a lifetime"})] == \
        figures[:1] + figures[2:]
