"""The demo figures of the docs (``docs/concepts.md``, "The demo project") and of the README's
walkthrough match the demo: the data files (read here with the standard library) and the project
that ``workbench init --demo`` builds (what ``make run`` serves)."""

from __future__ import annotations

import json
import re

from tests.support.prerequisites import REPO
from workbench.resources import DEMO_DIR
from workbench.store.database import Database
from workbench.store.meta import table_counts
from workbench.store.pools import read_pool, read_pool_pairs
from workbench.store.runs import read_run_rows

PAGE = REPO / "docs" / "concepts.md"
README = REPO / "README.md"


def _paragraph() -> str:
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(r"\*\*The demo project\*\*(.*?)\n\n", text, re.S)
    assert match, "docs/concepts.md has no '**The demo project**' paragraph"
    return " ".join(match.group(1).split())


def _number(pattern: str, paragraph: str) -> int:
    match = re.search(pattern, paragraph)
    assert match, f"docs/concepts.md demo paragraph does not match {pattern!r}: {paragraph}"
    return int(match.group(1).replace(",", ""))


def _jsonl_rows(name: str) -> list[dict]:
    lines = (DEMO_DIR / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_docs_demo_figures_match_the_demo(cli, tmp_path):
    paragraph = _paragraph()
    claimed = {
        "documents": _number(r"([\d,]+) documents", paragraph),
        "queries": _number(r"([\d,]+) queries", paragraph),
        "labels": _number(r"([\d,]+) reference SME labels", paragraph),
        "chunks": _number(r"`sections` chunking of ([\d,]+) chunks", paragraph),
        "run_rows": _number(r"`bm25` run of ([\d,]+) rows", paragraph),
        "k": _number(r"up to ([\d,]+) results", paragraph),
        "run_queries": _number(r"each of the ([\d,]+) queries", paragraph),
        "pool_pairs": _number(r"`demo` pool of ([\d,]+) pairs", paragraph),
        "depth": _number(r"\(depth ([\d,]+)\)", paragraph),
    }
    # The data files themselves, read without the workbench.
    assert claimed["documents"] == len(_jsonl_rows("documents.jsonl"))
    assert claimed["queries"] == len(_jsonl_rows("queries.jsonl"))
    assert claimed["labels"] == len(_jsonl_rows("labels.jsonl"))

    db_path = tmp_path / "demo.duckdb"
    # The default configuration's pool depth, as `make run` uses it.
    result = cli("--db", str(db_path), "init", "--demo")
    assert result.returncode == 0, result.stderr
    with Database(db_path) as db:
        counts = table_counts(db)
        run = read_run_rows(db, "bm25")
        pool = read_pool(db, "demo")
        pairs = read_pool_pairs(db, "demo")
    assert counts["documents"] == claimed["documents"]
    assert counts["queries"] == claimed["queries"]
    assert counts["judgments.human.ok"] == claimed["labels"]
    assert counts["chunks"] == claimed["chunks"] and counts["chunkings"] == 1
    assert len(run) == claimed["run_rows"]
    assert run.groupby("query_id").size().max() == claimed["k"]
    assert run["query_id"].nunique() == claimed["run_queries"]
    assert len(pairs) == claimed["pool_pairs"]
    assert pool["depth"] == claimed["depth"]
    # Nine figures checked.
    assert len(claimed) == 9


def test_readme_walkthrough_demo_figures_match_the_docs():
    """The README's walkthrough repeats four of the figures: they are the ones checked above."""
    readme = " ".join(README.read_text(encoding="utf-8").split())
    match = re.search(r"([\d,]+) documents, ([\d,]+) queries and ([\d,]+) SME labels, with a `sections` chunking, "
                      r"a `bm25` run and a `demo` pool of ([\d,]+) query–passage pairs", readme)
    assert match, "README walkthrough does not state the demo's documents, queries, labels and pool pairs"
    paragraph = _paragraph()
    assert [int(g.replace(",", "")) for g in match.groups()] == [
        _number(r"([\d,]+) documents", paragraph), _number(r"([\d,]+) queries", paragraph),
        _number(r"([\d,]+) reference SME labels", paragraph), _number(r"`demo` pool of ([\d,]+) pairs", paragraph)]
