"""The app in a real Streamlit server driven by Debian's chromium (Playwright).

* Importing more documents into the demo through the Data page: the existing chunking covers
  them (a chunking is a definition; documents imported later are chunked into it).
* Markup in the corpus stays inert text on the Queries & Labels page.
* A screenshot of every page (saved under ``WORKBENCH_SCREENSHOTS`` or the test's tmp dir).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.support.live_app import browser_page, open_in_app, painted, serve_shared, wait_idle
from tests.support.templates import demo_project
from workbench.services.ingest import import_file
from workbench.services.project.lifecycle import init_project, open_project

pytestmark = pytest.mark.browser

CANARY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> *emph* $x$'


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("WORKBENCH_SCREENSHOTS", tmp_path / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wait_idle(page, timeout: float = 60_000) -> None:
    """Until Streamlit has finished the script run that drew what the caller waited for (the
    app says ``notRunning``, nothing stale, no running indicator), and the page is painted
    (fonts loaded, two frames drawn) for a screenshot: waits on state, not a fixed pause."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout)
    wait_idle(page, timeout, start_within=0)
    painted(page)


def test_importing_documents_on_the_data_page_extends_the_existing_chunking(tmp_path):
    db = tmp_path / "demo.duckdb"
    demo_project(db)  # a copy of the per-process demo project (init_project(db, demo=True))
    extra = tmp_path / "more-handbook.jsonl"
    extra.write_text("".join(
        json.dumps({"_id": f"new-{i}", "title": f"New page {i}",
                    "text": f"# New page {i}\n\n## Scope\nThis policy covers topic {i}.\n\n## Rules\nRule {i}."}) + "\n"
        for i in range(4)))
    shots = _shots(tmp_path)
    with serve_shared(db) as url, browser_page() as page:
        page.goto(f"{url}/data")
        page.get_by_text("In the project").wait_for(timeout=60_000)
        _wait_idle(page)
        page.screenshot(path=str(shots / "data.png"), full_page=True)
        page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(extra))
        page.get_by_text("more-handbook.jsonl").first.wait_for(timeout=30_000)
        # The upload starts a script run, and a click made while a run is under way can be lost
        # (seen once in a whole run with 3 workers): wait for that run to end first.
        wait_idle(page, 60_000)
        page.get_by_role("button", name="Import").click()
        page.get_by_text(re.compile("Imported 4 documents from more-handbook.jsonl")).wait_for(timeout=60_000)
        _wait_idle(page)
        body = page.inner_text("body")
        page.screenshot(path=str(shots / "data-after-import.png"), full_page=True)
        # The existing demo chunking covers the 45 documents now, and nothing is flagged.
        assert "Chunking sections covers 45 of 45 documents" in body, body
        assert "covers 41 of 45" not in body.replace("Run bm25 covers 41 of 45", "")

        open_in_app(page, "Overview", "Relevance Workbench", timeout=60_000)  # its sidebar link: no reload
        page.get_by_text("Pipeline").wait_for(timeout=60_000)
        _wait_idle(page)
        page.screenshot(path=str(shots / "overview-after-import.png"), full_page=True)
        body = page.inner_text("body")
        # The run made before the import says it does not cover the new documents.
        assert "Run bm25 covers 41 of 45 documents" in body, body


def test_canary_stays_inert_on_queries_and_labels(tmp_path):
    db = tmp_path / "canary.duckdb"
    init_project(db)
    text = "Intro line. " + CANARY + " the answer is here."
    (tmp_path / "c.jsonl").write_text(json.dumps({"_id": "d1", "title": "T " + CANARY, "text": text}) + "\n")
    (tmp_path / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "Q " + CANARY,
                                                  "description": "D " + CANARY}) + "\n")
    start = text.index(CANARY)
    (tmp_path / "s.jsonl").write_text(json.dumps({"query_id": "q1", "doc_id": "d1", "start": start,
                                                  "end": start + len(CANARY), "grade": 2}) + "\n")
    with open_project(db) as project:
        import_file(project, "corpus", tmp_path / "c.jsonl")
        import_file(project, "queries", tmp_path / "q.jsonl")
        import_file(project, "qrels", tmp_path / "s.jsonl", format="spans")
    dialogs: list[str] = []
    with serve_shared(db) as url, browser_page() as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{url}/labels")
        page.get_by_text("Labelled passages").wait_for(timeout=60_000)
        page.locator("mark").first.wait_for(timeout=60_000)
        _wait_idle(page)
        body = page.inner_text("body")
        assert CANARY in body  # shown literally, markdown and math untouched
        assert page.evaluate("() => window.__pwned === undefined")
        assert page.locator("img[src='x']").count() == 0
        assert page.locator("mark").count() == 1
        assert dialogs == []
        page.screenshot(path=str(_shots(tmp_path) / "labels-canary.png"), full_page=True)


def test_screenshots_of_every_page(tmp_path):
    from workbench.ui.pages import PAGES

    db = tmp_path / "demo.duckdb"
    demo_project(db)  # a copy of the per-process demo project (init_project(db, demo=True))
    shots = _shots(tmp_path)
    with serve_shared(db) as url, browser_page() as page:
        page.set_viewport_size({"width": 1400, "height": 3200})  # the whole page in one shot
        page.goto(url)  # the Overview; every other page through its link in the sidebar (no reload)
        for spec in PAGES:
            heading = spec.title if spec.url_path != "overview" else "Relevance Workbench"
            if spec.url_path != "overview":
                open_in_app(page, spec.title, heading, timeout=60_000)
            page.get_by_role("heading", name=heading).first.wait_for(timeout=60_000)
            _wait_idle(page)
            body = page.inner_text("body")
            assert "Traceback" not in body and "Error" not in body.split("\n")[0]
            page.screenshot(path=str(shots / f"{spec.url_path}.png"), full_page=True)
            assert (shots / f"{spec.url_path}.png").stat().st_size > 10_000
