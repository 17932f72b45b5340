"""The Label and Calibration pages in a real Streamlit server driven by Debian's chromium.

* Five pairs labelled with the keyboard only (grade keys 0–3), the page reloaded half-way:
  every label is in the project afterwards, with time on task.
* Blind: the judge's output (its reason carries a marker naming the grade) is absent from the
  page's HTML until the SME submits; with "show after I submit" it appears afterwards.
* A document holding ``<script>`` and ``<img onerror>`` renders as literal text, never runs.
* The Calibration page shows the verdict first.
"""

from __future__ import annotations

import re

import pytest

from tests.support.calibration_project import build_project
from tests.support.live_app import browser_page, serve_shared, wait_pair_shown
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

pytestmark = pytest.mark.browser

CANARY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
MARKER = "JUDGE-SAYS-"
WAIT = 0.45  # seconds a pair is on screen (by the card's clock) before a key (the page refuses grades before 0.3 s)


def _project(path):
    db, truth = build_project(path)
    try:
        with db.transaction() as tx:
            tx.execute("UPDATE documents SET text = text || ?", [" Warning: " + CANARY + " end."])
            tx.execute("UPDATE judgments SET reason = ? || grade WHERE source = 'llm'", [MARKER])
        cal.create_sample(db, "s", "p", seed=1)
    finally:
        db.close()


def _wait_idle(page, timeout: float = 60_000) -> None:
    """Until Streamlit's script run has finished (the app root says ``notRunning``): a key
    pressed during a run can be lost, so every key press waits for this first."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def _sign_in(page, url: str) -> None:
    page.goto(f"{url}/label")
    box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
    box.wait_for(timeout=60_000)
    box.fill("sme1")
    box.press("Enter")
    page.get_by_text(re.compile(r"Pair \d+ of 200")).wait_for(timeout=60_000)
    page.get_by_role("button", name=re.compile("Not relevant")).wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_role("heading", name="Label").click()  # leave the text box: grade keys act on the page


def _press_grade(page, grade: int, n_done: int) -> None:
    _wait_idle(page)
    wait_pair_shown(page, WAIT)
    page.keyboard.press(str(grade))
    page.get_by_text(re.compile(rf"{n_done} labelled")).wait_for(timeout=60_000)
    page.get_by_text(f"Saved grade {grade}").wait_for(timeout=60_000)
    _wait_idle(page)


def test_keyboard_labelling_survives_a_reload_and_stays_blind(tmp_path):
    path = tmp_path / "project.duckdb"
    _project(path)
    grades = [0, 1, 0, 1, 0]
    with serve_shared(path) as url, browser_page() as page:
        _sign_in(page, url)
        html = page.content()
        assert MARKER not in html
        assert page.evaluate("() => window.__pwned") is None
        document = page.locator("[data-testid='label-document']").inner_text()
        assert "<script>window.__pwned = 1</script>" in document and "onerror" in document
        # a grade needing evidence is refused without it, and nothing is stored
        _wait_idle(page)
        wait_pair_shown(page, WAIT)
        page.keyboard.press("2")
        page.get_by_text("Grades 2 and 3 need evidence").wait_for(timeout=60_000)
        _wait_idle(page)
        for i, grade in enumerate(grades[:3]):
            assert MARKER not in page.content()
            _press_grade(page, grade, i + 1)
        page.reload()
        _sign_in(page, url)
        page.get_by_text(re.compile("3 labelled")).wait_for(timeout=60_000)
        for i, grade in enumerate(grades[3:], start=3):
            assert MARKER not in page.content()
            _press_grade(page, grade, i + 1)
        assert page.evaluate("() => window.__pwned") is None
        # reveal after submit: the judge's reason appears only then
        page.get_by_text("Show the judge's label after I submit").click()
        _wait_idle(page)
        assert MARKER not in page.content()
        page.get_by_role("heading", name="Label").click()
        _wait_idle(page)
        wait_pair_shown(page, WAIT)
        page.keyboard.press("1")
        page.get_by_text(re.compile(MARKER + r"\d")).wait_for(timeout=60_000)
        page.goto(f"{url}/calibration")
        page.locator("[data-testid='calibration-verdict']").wait_for(state="attached", timeout=60_000)
        # the last section: the whole report has been drawn
        page.get_by_text("Where SMEs disagree").wait_for(timeout=60_000)
        _wait_idle(page)
        verdict = page.locator("[data-testid='calibration-verdict']").get_attribute("data-verdict")
        body = page.inner_text("body")
        assert verdict in ("pass", "fail", "inconclusive"), body
        # the verdict (with its reasons) comes before the figures
        assert verdict.upper() in body and "Figures with 95% intervals" in body, body
        assert body.index(verdict.upper()) < body.index("Figures with 95% intervals"), body
    db = Database(path)
    try:
        events = db.query_df("SELECT position, grade, seconds, revealed FROM label_events ORDER BY event_id")
        human = db.query_df("SELECT grade FROM judgments WHERE source = 'human' AND assessor = 'sme1' "
                            "ORDER BY judgment_id")
    finally:
        db.close()
    assert events["grade"].tolist()[:5] == grades
    assert human["grade"].tolist()[:5] == grades and len(human) == 6
    assert events["position"].nunique() == 6
    assert (events["seconds"] > 0).all()
    assert events["revealed"].tolist() == [False] * 5 + [True]
