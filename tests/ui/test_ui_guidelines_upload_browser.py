"""The lead uploads labelling guidelines on the Calibration page, in a real Streamlit server and
Debian's chromium (issue 34): the upload is stored with the chosen sample (its SHA-256 is the
file's), a second upload becomes version 2 with the first kept in the history, a file that is
not UTF-8 is refused with one line and stores nothing, and an SME's label afterwards records the
version in force. The Label page shows the stored guidelines in its panel."""

from __future__ import annotations

import hashlib
import re

import pytest

from tests.support.calibration_project import build_project
from tests.support.live_app import browser_page, open_label_page_as, serve_shared, wait_idle
from workbench.services.calibration import guidelines
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

pytestmark = pytest.mark.browser

LONG = 120_000


def _project(path) -> None:
    db, _ = build_project(path)
    try:
        cal.create_sample(db, "s", "p", seed=1)  # the only sample: the page's choice
    finally:
        db.close()


def _stored(path) -> dict | None:
    db = Database(path, wait=60)  # the server holds the file for a moment at each of its runs
    try:
        return guidelines.guidelines(db, "s")
    finally:
        db.close()


def _upload(page, file) -> None:
    """Open the routing panel (when closed), choose ``file`` in its uploader and press Store."""
    wait_idle(page, LONG, start_within=0)
    zone = page.locator("[data-testid='stFileUploaderDropzone']")
    if not zone.is_visible():  # the panel is an expander, closed at first
        page.locator("[data-testid='stExpander'] summary", has_text="Route the labelling").first.click()
        zone.wait_for(state="visible", timeout=LONG)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(file))
    page.get_by_text(file.name).first.wait_for(timeout=LONG)
    wait_idle(page, LONG)
    page.get_by_role("button", name="Store the guidelines with this sample").click()


def test_the_lead_uploads_guidelines_on_the_calibration_page(tmp_path):
    path = tmp_path / "project.duckdb"
    _project(path)
    first, second, bad = tmp_path / "rules.md", tmp_path / "rules-v2.md", tmp_path / "broken.md"
    first.write_text("# Grading rules\n\nGrade **2**: part of the answer.\n", encoding="utf-8")
    second.write_text("# Grading rules\n\nGrade **2**: one sentence answers part.\n", encoding="utf-8")
    bad.write_bytes(b"# Rules\n\xff\xfe not text\n")
    with serve_shared(path) as url, browser_page() as page:
        page.goto(f"{url}/calibration")
        page.get_by_role("heading", name="Calibration", exact=True).first.wait_for(timeout=LONG)
        _upload(page, first)
        page.get_by_text("Stored the guidelines with s").first.wait_for(timeout=LONG)
        stored = _stored(path)
        assert stored["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
        assert stored["source"] == "rules.md" and stored["history"] == []
        assert stored["text"] == first.read_text(encoding="utf-8")

        _upload(page, bad)  # refused with one line: what, where; nothing stored
        page.get_by_text(re.compile(r"broken\.md.*not UTF-8")).first.wait_for(timeout=LONG)
        assert _stored(path)["sha256"] == stored["sha256"]

        _upload(page, second)
        page.get_by_text("Stored the guidelines with s").first.wait_for(timeout=LONG)
        now = _stored(path)
        assert now["sha256"] == hashlib.sha256(second.read_bytes()).hexdigest()
        assert [h["sha256"] for h in now["history"]] == [stored["sha256"]]
        wait_idle(page, LONG)
        page.get_by_text(re.compile(r"Guidelines v2, version " + now["sha256"][:12])).first.wait_for(timeout=LONG)

        # an SME sees them on the Label page; a label given now records version 2
        open_label_page_as(page, url, "ann")
        page.get_by_text("Labelling guidelines").first.click()
        panel = page.locator("[data-testid='label-guidelines']")
        panel.get_by_text("one sentence answers part").wait_for(timeout=LONG)
    db = Database(path, wait=60)
    try:
        cal.save_label(db, "s", "ann", 0, 1)
        assert db.query_all("SELECT guidelines_sha256 FROM label_events") == [(now["sha256"],)]
    finally:
        db.close()
