"""Every page and every download, per role, in a real Streamlit server driven by Debian's
chromium: an annotator signed in with a password never receives a judge grade or reason or
another person's grade (:mod:`workbench.services.visibility`).

The project (:mod:`tests.support.blind_project`): the demo, judged by the offline judge (a
reason on every pool pair), a calibration sample two other annotators labelled (with marked
comments), a judge configuration whose reasons carry a marker, and one imported reference label.
The server runs in a folder of its own that holds ``.streamlit/secrets.toml`` (written by the
project's hash helper) and ``config/workbench.toml`` (``auth = "password"``), as an operator's.

Each role signs in through the form, then visits every page its navigation lists (an annotator's
leaves out Data, Judge and Calibration) through the sidebar and tries every
choice of the Labels, Level and Format selectors (Qrels, Evaluate), every query of the Retrieve
& Pool peek and of the Judge page's example, and presses every download it is offered. Every
websocket frame the browser receives, every page's text and every downloaded file is kept; for
the annotator none may hold a judge reason, a marker, a "grade" next to a pair other than the
imported one, or a qrels file. The lead's walk is the control: the same detectors find the
judge's grades and other people's labels there. One walk per test, so that parallel workers can
take them apart; the control walks are shorter (:func:`_walk`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import blind_project
from tests.support.live_app import browser_page, choose_option, serve, wait_idle
from workbench.store.database import Database

pytestmark = pytest.mark.browser

LONG = 180_000
HEADINGS = {"Overview": "Relevance Workbench"}  # a page's title when it is not the link's
PAGES = ["Overview", "Data", "Queries & Labels", "Retrieve & Pool", "Judge", "Label", "Calibration", "Qrels",
         "Evaluate", "Experiments", "Query kinds"]
LEAD_ONLY = ["Data", "Judge", "Calibration"]  # not in an annotator's navigation (workbench.ui.pages)
ANNOTATOR_PAGES = [p for p in PAGES if p not in LEAD_ONLY]
PEEK_HEAD = re.compile(r"priority \d+ · .*? · (\S+) · (grade \d|no label yet) · RRF")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("blind-app")
    (folder / ".streamlit").mkdir()
    (folder / ".streamlit" / "secrets.toml").write_text(blind_project.secrets_toml())
    (folder / "config").mkdir()
    (folder / "config" / "workbench.toml").write_text('[app]\nauth = "password"\n')
    db_path = folder / "blind.duckdb"
    info = blind_project.copy(db_path)
    with Database(db_path) as db:
        info["queries"] = db.query_df("SELECT DISTINCT query_id FROM pool_pairs ORDER BY query_id")["query_id"].tolist()
    with serve(db_path, cwd=folder) as url:
        yield url, info


def _idle(page) -> None:
    wait_idle(page, LONG)


class Walk:
    """One signed-in browser session: what it received and saw."""

    def __init__(self, page, url: str, name: str):
        self.page, self.url, self.name = page, url, name
        self.frames: list[bytes] = []
        self.texts: dict[str, str] = {}
        self.downloads: dict[str, bytes] = {}
        self.peeks: dict[str, str] = {}
        self.tracebacks: list[str] = []
        self.navigation: list[str] = []  # the page titles the sidebar listed after signing in
        self.retries: list[dict] = []  # select box lists opened again (tests.support.live_app.choose_option)
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        self.frames.append(payload if isinstance(payload, bytes) else str(payload).encode())

    def sign_in(self) -> None:
        page = self.page
        page.goto(self.url)
        page.get_by_role("textbox", name="User name").fill(self.name)
        page.get_by_role("textbox", name="Password").fill(blind_project.PASSWORDS[self.name])
        page.get_by_role("button", name="Sign in").click()
        page.get_by_text(f"{self.name} · {blind_project.ROLES[self.name]}").wait_for(timeout=LONG)
        _idle(page)
        links = page.locator("[data-testid='stSidebarNav'] a")
        # each link's text is its icon's name, then its title
        self.navigation = [links.nth(i).inner_text().strip().split("\n")[-1] for i in range(links.count())]

    def open(self, title: str) -> None:
        nav = self.page.locator("[data-testid='stSidebarNav']")
        nav.get_by_role("link", name=title, exact=True).click()
        self.page.get_by_role("heading", name=HEADINGS.get(title, title), exact=True).first.wait_for(timeout=LONG)
        _idle(self.page)
        self.keep(title)

    def keep(self, key: str) -> None:
        text = self.page.inner_text("body")
        if "Traceback" in text:  # asserted at the end, with every page that showed one
            self.tracebacks.append(key)
        self.texts[key] = self.texts.get(key, "") + "\n" + text

    def options(self, label: str) -> list[str]:
        box = self.page.get_by_label(label, exact=True).first
        if not box.count():
            return []
        self._open_list(box)
        found = [o.inner_text().strip() for o in self.page.get_by_role("option").all()]
        self.page.keyboard.press("Escape")
        return found

    def _open_list(self, box) -> None:
        """Open a select box's list (a click; a box that kept the focus opens with the down key)."""
        box.click()
        try:
            self.page.get_by_role("option").first.wait_for(timeout=3000)
        except Exception:  # noqa: BLE001 - playwright's timeout: try the keyboard
            box.press("ArrowDown")
            self.page.get_by_role("option").first.wait_for(timeout=LONG)

    def choose(self, label: str, option: str) -> None:
        choose_option(self.page, label, option, LONG, retries=self.retries)

    def download_all(self, key: str) -> None:
        buttons = self.page.locator("[data-testid='stDownloadButton'] button")
        for i in range(buttons.count()):
            with self.page.expect_download(timeout=LONG) as got:
                buttons.nth(i).click()
            download = got.value
            self.downloads[f"{key}: {download.suggested_filename}"] = Path(download.path()).read_bytes()
        if buttons.count():  # a download button may rerun its page (no button pressed: nothing to wait for)
            _idle(self.page)


def _walk(url: str, name: str, info: dict, *, every_query: bool, every_choice: bool,
          pages: list[str] = PAGES) -> Walk:
    """The ``pages``; with ``every_query`` every query of the peeks (else three); with
    ``every_choice`` every Labels, Level and Format choice of the Qrels page (else the document
    level with its first Labels choice in every format: enough for the control walks of a lead and
    a viewer, which only show that the detectors find what a leak would look like)."""
    queries = info["queries"] if every_query else info["queries"][:3]
    with browser_page() as page:
        from playwright.sync_api import expect  # (browser_page says so when playwright is missing)

        walk = Walk(page, url, name)
        walk.sign_in()
        for title in pages:
            walk.open(title)
            if title == "Qrels":
                for level in ("Documents", "Chunks") if every_choice else ("Documents",):
                    page.locator("[data-testid='stRadio']").get_by_text(level, exact=True).click()
                    _idle(page)
                    for labels in walk.options("Labels")[:None if every_choice else 1]:
                        walk.choose("Labels", labels)
                        walk.keep(f"Qrels {level} {labels}")
                        for fmt in walk.options("Format"):
                            walk.choose("Format", fmt)
                            walk.keep(f"Qrels {level} {labels} {fmt}")
                            walk.download_all(f"Qrels {level} {labels} {fmt}")
            elif title == "Evaluate":
                for labels in walk.options("Labels"):
                    walk.choose("Labels", labels)
                    walk.keep(f"Evaluate {labels}")
            elif title == "Retrieve & Pool":
                page.get_by_text("Peek at a query's pool").click()  # opens in the browser (no run)
                page.get_by_label("Query", exact=True).first.wait_for(timeout=LONG)
                expander = page.locator("[data-testid='stExpander']").filter(has_text="Peek at a query's pool")
                for query in queries:
                    walk.choose("Query", query)  # reruns the peek's fragment
                    expect(expander).to_contain_text(f"{query}: ", timeout=LONG)  # the peek shows it
                    walk.peeks[query] = expander.inner_text()
                    walk.keep(f"Peek {query}")
                if page.get_by_role("button", name="Prepare the file").count():
                    page.get_by_role("button", name="Prepare the file").first.click()
                    _idle(page)
                walk.download_all("Retrieve")
            elif title == "Judge":
                for query in queries:
                    walk.choose("Example query", query)  # reruns the example's fragment
                    expect(page.locator("body")).to_contain_text(f"First pair of {query}: ", timeout=LONG)
                    walk.keep(f"Judge {query}")
            elif title == "Data":
                if page.get_by_role("button", name="Prepare the file").count():
                    page.get_by_role("button", name="Prepare the file").click()
                    _idle(page)
                walk.download_all("Data")
            else:
                walk.download_all(title)
    if walk.retries:  # shown with the test's output: what a select box showed instead of the option
        print(f"{name}: select box lists opened again: {walk.retries}")
    return walk


def _received(walk: Walk) -> str:
    return "\n".join([b"\n".join(walk.frames).decode("utf-8", "replace"), *walk.texts.values(),
                      *(data.decode("utf-8", "replace") for data in walk.downloads.values())])


def _graded_peeks(walk: Walk) -> list[tuple[str, str]]:
    """(query, chunk) of every pair the peek showed with a grade."""
    return [(query, item) for query, text in walk.peeks.items()
            for item, grade in PEEK_HEAD.findall(text) if grade.startswith("grade")]


def test_the_detectors_find_the_judge_output_and_grades_a_lead_receives(served):
    """The control for the annotator's walk: the same detectors find the judge's reasons, graded
    peeks and qrels files in what a lead receives."""
    url, info = served
    lead = _walk(url, "lea", info, every_query=False, every_choice=False)
    everything = _received(lead)
    assert "It would grade this pair" in everything
    assert _graded_peeks(lead), lead.peeks
    assert any(name.startswith("Qrels") and "trec" in name for name in lead.downloads), list(lead.downloads)
    assert not lead.tracebacks, lead.tracebacks


def _assert_blind(walk: Walk, info: dict) -> str:
    """What an annotator received holds no judge output and no other person's grade; returns it."""
    reasons = [r for r in info["reasons"] if len(r) >= 30]
    assert reasons, "the offline judge stored reasons"
    received = _received(walk)
    for marker in blind_project.MARKERS:
        assert marker not in received, marker
    leaked = [r for r in reasons if r in received]
    assert not leaked, leaked[:3]
    assert "It would grade this pair" not in received
    # The only grade next to a pair is the imported reference label (its document's chunks).
    query, doc = info["imported"]
    assert {(q, item.split(":")[1]) for q, item in _graded_peeks(walk)} <= {(query, doc)}
    assert all(PEEK_HEAD.search(text) for text in walk.peeks.values())  # the pairs are there, unlabelled
    # No label file: qrels and judgments downloads are not offered; run downloads stay allowed.
    assert not [name for name in walk.downloads if "qrels" in name.lower() or "judgment" in name.lower()]
    assert any(name.startswith("Retrieve") for name in walk.downloads), list(walk.downloads)
    return received


def test_an_annotator_receives_no_judge_output_and_no_other_persons_grade(served):
    """Every page, every choice of its selectors, every download (the peeks: three queries)."""
    url, info = served
    carol = _walk(url, "carol", info, every_query=False, every_choice=True, pages=ANNOTATOR_PAGES)
    received = _assert_blind(carol, info)
    assert len(carol.texts) > len(ANNOTATOR_PAGES)
    assert carol.navigation == ANNOTATOR_PAGES  # the lead-only pages are not offered at all
    assert "leads and viewers download them" in received
    # Last, so that a page broken for another reason does not hide a leak found above.
    assert not carol.tracebacks, carol.tracebacks


def test_no_query_of_the_peeks_shows_an_annotator_a_grade(served):
    """The page that shows one query at a time to an annotator (the Retrieve & Pool peek; the
    Judge page's example is a lead's and a viewer's), for every query of the pool."""
    url, info = served
    carol = _walk(url, "carol", info, every_query=True, every_choice=True, pages=["Retrieve & Pool"])
    _assert_blind(carol, info)
    assert set(carol.peeks) == set(info["queries"])
    assert not carol.tracebacks, carol.tracebacks


def test_a_viewer_reads_the_grades(served):
    url, info = served
    viewer = _walk(url, "vi", info, every_query=False, every_choice=False)
    assert _graded_peeks(viewer) and "It would grade this pair" in _received(viewer)
    assert not viewer.tracebacks, viewer.tracebacks
