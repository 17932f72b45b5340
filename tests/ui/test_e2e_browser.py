"""End to end in a real Streamlit server driven by Debian's chromium: a new user's whole journey,
in the browser alone, from an empty project to an evaluated, calibrated comparison of two
retrievers.

fresh project → Data: upload the demo's documents, queries and SME labels, plus a canary
document, query and label → Retrieve & Pool: chunk, BM25, a second BM25 (no stemming, no
stopwords), pool both → Judge: the offline judge grades the pool → Calibration: draw a sample →
Label: five pairs graded with the keyboard → Calibration: the report shows a verdict → Qrels:
download TREC qrels (the file parses with the project's reader) → Evaluate: both runs scored and
compared.

The canary (``<script>``, ``<img onerror>``, ``*x*``, ``$x$``) must stay literal text on every
page that shows it: no script runs, no image element, no dialog, no markdown emphasis.
A screenshot of every page is saved under ``WORKBENCH_SCREENSHOTS`` (else the test's tmp dir).
Waits are on visible state, never on time, so the test holds on a loaded machine.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.support.live_app import browser_page, open_in_app, painted, serve, wait_idle
from workbench.resources import DEMO_DIR

pytestmark = pytest.mark.browser

CANARY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> *x* $x$'
LONG = 180_000  # ms: one step of real work (BM25, judging) on a shared 2-core machine


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("WORKBENCH_SCREENSHOTS", tmp_path / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _idle(page, timeout: float = LONG) -> None:
    """Until Streamlit has finished the script run the last action started."""
    wait_idle(page, timeout)


def _done(page) -> None:
    """Until the run that drew what the test has just waited for has finished: that run has
    started, so there is no wait for a run to begin (:func:`wait_idle`'s ``start_within``)."""
    wait_idle(page, LONG, start_within=0)


def _inert(page) -> None:
    """The canary never ran: no script effect, no image element built from it."""
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("img[src='x']").count() == 0
    assert "Traceback" not in page.inner_text("body")


def _shot(page, shots: Path, name: str) -> None:
    """The whole page in one picture: Streamlit scrolls inside its own container, so the
    viewport is made tall for the shot, then put back."""
    page.set_viewport_size({"width": 1400, "height": 2600})  # (a resize starts no script run)
    _done(page)
    painted(page)  # fonts loaded, and two frames drawn since the resize
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})


def _open(page, title: str, heading: str | None = None) -> None:
    """Open the page ``title`` by its link in the sidebar, as a user does (one session, no
    reload), until its run has drawn its heading (default ``title``) and finished."""
    open_in_app(page, title, heading, timeout=LONG)


def _choose(scope, label: str, option: str) -> None:
    """Pick ``option`` in the select box (or multiselect) labelled ``label`` inside ``scope``
    (a page or a locator): type it to filter the list, then Enter takes the first match."""
    page = getattr(scope, "page", scope)
    box = scope.get_by_label(label, exact=True).first
    box.click()
    page.keyboard.type(option)
    page.get_by_role("option").filter(has_text=option).first.wait_for()
    page.keyboard.press("Enter")


def _form(page, button: str):
    return page.locator("[data-testid='stForm']").filter(has=page.get_by_role("button", name=button))


def _upload(page, kind: str, path: Path, expect: str) -> None:
    """On the Data page, which leaves an import with a fresh uploader (no file left from before)."""
    _choose(page, "What", kind)
    _idle(page)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(path))
    page.get_by_text(path.name).first.wait_for(timeout=LONG)
    _idle(page)
    page.get_by_role("button", name="Import").click()
    page.get_by_text(re.compile(expect)).first.wait_for(timeout=LONG)
    _done(page)


def _canary_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    text = "Canary policy. " + CANARY + " Laptops are refreshed every 36 months."
    corpus = tmp_path / "canary-docs.jsonl"
    corpus.write_text(json.dumps({"_id": "canary-doc", "title": "Canary " + CANARY, "text": text}) + "\n")
    queries = tmp_path / "canary-queries.jsonl"
    queries.write_text(json.dumps({"_id": "q-canary", "text": "canary laptops " + CANARY}) + "\n")
    start = text.index(CANARY)
    labels = tmp_path / "canary-labels.jsonl"
    labels.write_text(json.dumps({"query_id": "q-canary", "doc_id": "canary-doc", "start": start,
                                  "end": start + len(CANARY), "grade": 2, "assessor": "canary-sme"}) + "\n")
    return corpus, queries, labels


def _press_grade(page, grade: int, n_done: int) -> None:
    """Press a grade key and wait until the label is stored; pressed again only while the page
    still shows the previous count (a key can be dropped while Streamlit redraws)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(4):
        page.keyboard.press(str(grade))
        try:
            page.get_by_text(re.compile(rf"\b{n_done} labelled")).first.wait_for(timeout=20_000)
            break
        except PlaywrightTimeout:
            if page.get_by_text(re.compile(rf"\b{n_done} labelled")).count():
                break
            page.get_by_text(re.compile(rf"\b{n_done - 1} labelled")).first.wait_for(timeout=LONG)
            _idle(page)
    page.get_by_text(f"Saved grade {grade}").wait_for(timeout=LONG)
    _done(page)


def _journey(page, url: str, shots: Path, tmp_path: Path, canary_docs: Path, canary_queries: Path,
             canary_labels: Path) -> None:
    from workbench.core.metrics.readers import read_qrels

    page.set_default_timeout(LONG)

    # Overview of an empty project names the next step.
    page.goto(url)
    page.get_by_text("Pipeline").wait_for()
    _done(page)
    assert "Next step" in page.inner_text("body")
    _shot(page, shots, "overview-empty")

    # Data: the demo's files and the canary, uploaded through the page.
    _open(page, "Data")
    _upload(page, "Corpus (documents)", DEMO_DIR / "documents.jsonl", r"Imported 41 documents")
    _upload(page, "Corpus (documents)", canary_docs, r"Imported 1 document")
    _upload(page, "Queries", DEMO_DIR / "queries.jsonl", r"Imported 44 queries")
    _upload(page, "Queries", canary_queries, r"Imported 1 quer")
    _upload(page, "Qrels (judgments)", DEMO_DIR / "labels.jsonl", r"Imported \d+")
    _upload(page, "Qrels (judgments)", canary_labels, r"Imported 1")
    _inert(page)
    _shot(page, shots, "data")

    # Retrieve & Pool: chunk, two retrievers, one pool.
    _open(page, "Retrieve & Pool")
    form = _form(page, "Create chunking")
    form.get_by_label("Name", exact=True).fill("sections")
    form.get_by_role("button", name="Create chunking").click()
    page.get_by_text(re.compile(r"sections")).first.wait_for()
    page.locator("[data-table='chunkings']").wait_for()
    _done(page)
    for name, stem, stop in (("bm25", "english", "english"), ("bm25-plain", "none", "none")):
        form = _form(page, "Run BM25")
        form.get_by_label("Run name", exact=True).fill(name)
        form.get_by_label("Stemmer language", exact=True).fill(stem)
        form.get_by_label("Stopwords", exact=True).fill(stop)
        form.get_by_role("button", name="Run BM25").click()
        page.locator("[data-table='runs']").get_by_text(name, exact=True).first.wait_for()
        _done(page)
    form = _form(page, "Build pool")
    form.get_by_label("Pool name", exact=True).fill("main")
    form.get_by_label("Depth", exact=True).fill("10")
    def chosen() -> list[str]:  # the chips of the Runs box: each its own line of the form's text
        lines = [line.strip() for line in form.inner_text().splitlines()]
        return [name for name in ("bm25", "bm25-plain") if name in lines]

    for name in ("bm25", "bm25-plain"):
        if name not in chosen():  # the page pre-selects the run it has just made
            _choose(form, "Runs", name)
            page.keyboard.press("Escape")
    assert chosen() == ["bm25", "bm25-plain"], form.inner_text()
    form.get_by_role("button", name="Build pool").click()
    page.get_by_text(re.compile(r"Pool main: [\d,]+ pairs")).first.wait_for()
    _done(page)
    _inert(page)
    _shot(page, shots, "retrieve")

    # Judge: the offline judge grades the whole pool.
    _open(page, "Judge")
    page.get_by_text("What the judge sees").wait_for()
    page.get_by_role("button", name="Start").click()
    page.get_by_text(re.compile(r"\b([\d,]+) of \1 judged")).first.wait_for(timeout=3 * LONG)
    _done(page)
    _inert(page)
    _shot(page, shots, "judge")

    # Calibration: draw a sample of the judged pool.
    _open(page, "Calibration")
    form = _form(page, "Draw sample")
    form.get_by_label("Pairs to draw", exact=True).fill("100")
    form.get_by_role("button", name="Draw sample").click()
    page.get_by_text(re.compile(r"Drew sample")).first.wait_for()
    _done(page)

    # Label: five pairs with the keyboard only.
    _open(page, "Label")
    box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
    box.fill("sme-e2e")
    box.press("Enter")
    page.get_by_text(re.compile(r"Pair \d+ of 100")).wait_for()
    page.get_by_role("button", name=re.compile("Not relevant")).wait_for()
    _done(page)
    page.get_by_role("heading", name="Label").click()  # leave the text box: keys act on the page
    for i, grade in enumerate([0, 1, 0, 1, 0]):
        _press_grade(page, grade, i + 1)
    _inert(page)
    _shot(page, shots, "label")

    # Calibration: the report shows a verdict first.
    _open(page, "Calibration")
    verdict = page.locator("[data-testid='calibration-verdict']")
    verdict.wait_for(state="attached")
    _done(page)
    assert verdict.get_attribute("data-verdict") in ("pass", "fail", "inconclusive")
    _inert(page)
    _shot(page, shots, "calibration")

    # Qrels: the policy, counts, coverage; TREC download parses.
    _open(page, "Qrels")
    page.get_by_text("Coverage of the pools").wait_for()
    body = page.inner_text("body")
    assert "qrels policy" in body.lower() and "main" in body
    with page.expect_download() as download:
        page.get_by_role("button", name=re.compile("Download TREC qrels")).click()
    saved = tmp_path / "downloaded-qrels.txt"
    download.value.save_as(saved)
    qrels = read_qrels(saved)
    assert len(qrels) > 90  # compared line by line with `workbench export qrels` after the journey
    assert "q-canary" in set(qrels.query_ids.to_pylist())
    _shot(page, shots, "qrels")

    # Evaluate: both runs scored and compared.
    _open(page, "Evaluate")
    page.locator("[data-table='evaluate-means']").wait_for()
    page.locator("[data-table='evaluate-comparison']").wait_for()
    _done(page)
    means = page.locator("[data-table='evaluate-means']").inner_text()
    assert "bm25-plain" in means and "ndcg@10" in means
    comparison = page.locator("[data-table='evaluate-comparison']").inner_text()
    assert "bm25-plain" in comparison and "recall@10" in comparison
    # the canary query in the drill-down: its text is literal
    picker = page.get_by_label("Any query (worst first)", exact=True).first
    picker.click()
    page.keyboard.type("q-canary")
    page.keyboard.press("Enter")
    detail = page.locator(".st-key-evaluate_query_detail")
    detail.get_by_text("canary laptops", exact=False).first.wait_for()
    _done(page)
    assert "canary laptops " + CANARY in detail.inner_text()
    assert "unjudged" in detail.inner_text() or "2" in detail.inner_text()
    _inert(page)
    _shot(page, shots, "evaluate")

    # Queries & Labels (the canary's literal rendering there is test_ui_browser's canary test)
    _open(page, "Queries & Labels")
    _inert(page)
    _shot(page, shots, "labels")

    _open(page, "Query kinds")
    _inert(page)
    _shot(page, shots, "query-kinds")

    _open(page, "Overview", "Relevance Workbench")
    page.get_by_text("Pipeline").wait_for()
    _done(page)
    _inert(page)
    _shot(page, shots, "overview")


def test_new_user_goes_from_an_empty_project_to_a_compared_evaluation(tmp_path, cli):
    db = tmp_path / "fresh.duckdb"
    created = cli("--db", str(db), "init")
    assert created.returncode == 0, created.stderr
    shots = _shots(tmp_path)
    canary_docs, canary_queries, canary_labels = _canary_files(tmp_path)
    dialogs: list[str] = []
    with serve(db, {"OPENAI_API_KEY": ""}) as url, browser_page() as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        try:
            _journey(page, url, shots, tmp_path, canary_docs, canary_queries, canary_labels)
        except Exception:
            page.screenshot(path=str(shots / "failure.png"), full_page=True)
            print(page.inner_text("body"))  # shown by pytest with the failure
            raise
    assert dialogs == []
    # The page's download is the CLI's export: same service, same rule, same lines.
    exported = tmp_path / "cli-qrels.txt"
    done = cli("--db", str(db), "export", "qrels", "--format", "trec", "--out", str(exported))
    assert done.returncode == 0, done.stderr
    downloaded = (tmp_path / "downloaded-qrels.txt").read_text().splitlines()
    assert sorted(downloaded) == sorted(exported.read_text().splitlines())
