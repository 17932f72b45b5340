"""docs/python-api.md is a notebook that runs: its ```python blocks are executed in order, in one
namespace, in an empty folder, so the page cannot fall behind the API."""

from __future__ import annotations

import re

import pytest

from tests.support.prerequisites import REPO

PAGE = REPO / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line number, code)`` of every fenced ```python block, in order."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def run_blocks(blocks: list[tuple[int, str]], source: str) -> dict:
    """Run the blocks in one namespace; a failing block is reported with its line in the page."""
    namespace: dict = {"__name__": "__doc_page__"}
    for line, code in blocks:
        try:
            exec(compile(code, f"{source}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the block at {source}:{line} fails: {type(exc).__name__}: {exc}") from exc
    return namespace


def test_the_page_runs_as_written(tmp_path, monkeypatch):
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 8, "the page lost its examples"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WORKBENCH_DB", raising=False)
    monkeypatch.delenv("WORKBENCH_CONFIG", raising=False)
    ns = run_blocks(blocks, "docs/python-api.md")
    # what the page shows is what the API did
    assert (tmp_path / "demo.duckdb").is_file()
    assert ns["report"].state == "finished" and ns["report"].judged == 880
    assert ns["gate"].verdict in ("pass", "fail", "inconclusive")
    assert list(ns["result"].to_pandas().index) == ["bm25", "bm25-short"]
    assert ns["small"].aggregate["P@1"] == 0.0  # d2 (grade 0) scores higher than d1


def test_a_failing_block_is_named_by_its_line(tmp_path):
    text = "# t\n\n```python\nx = 1\n```\n\ntext\n\n```python\nassert x == 2\n```\n\n```text\nnot run\n```\n"
    blocks = python_blocks(text)
    assert [line for line, _ in blocks] == [4, 10]
    with pytest.raises(AssertionError, match=r"page\.md:10 fails: AssertionError"):
        run_blocks(blocks, "page.md")
    assert run_blocks(blocks[:1], "page.md")["x"] == 1
