"""The app works offline: a lead who opens every page of the navigation in a real Streamlit
server (driven by Debian's chromium) causes no request to any host but the app's own.

Every request the page makes is recorded (``page.on("request")``: documents, scripts, styles,
fonts, images and the favicon, which the browser loads for the tab), and every websocket it
opens. ``data:`` and ``blob:`` addresses are made in the browser and never leave the machine.
Before the fix, Streamlit's front end made each page's ``:material/...:`` icon the tab's
favicon, loaded from ``https://fonts.gstatic.com/s/i/short-term/release/materialsymbolsrounded``
(issue 37); the app now names a favicon of its own (:mod:`workbench.ui.app`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.support.live_app import browser_page, open_in_app, serve_shared, wait_idle
from tests.support.templates import demo_project
from workbench.services import access
from workbench.ui.pages import page_specs

pytestmark = pytest.mark.browser

LONG = 180_000
HEADINGS = {"Overview": "Relevance Workbench"}  # a page's heading when it is not its title


def _elsewhere(addresses: list[str], app_host: str) -> list[str]:
    """The addresses whose host is not the app's (``data:``/``blob:`` ones are the browser's own)."""
    return sorted({a for a in addresses if not a.startswith(("data:", "blob:")) and urlsplit(a).netloc != app_host})


def test_the_elsewhere_filter_keeps_only_other_hosts():
    host = "127.0.0.1:8501"
    addresses = ["http://127.0.0.1:8501/", "ws://127.0.0.1:8501/_stcore/stream", "data:image/svg+xml,<svg/>",
                 "blob:http://127.0.0.1:8501/x", "https://fonts.gstatic.com/s/i/a.svg", "http://127.0.0.1:9999/x",
                 "http://localhost:8501/"]
    assert _elsewhere(addresses, host) == ["http://127.0.0.1:9999/x", "http://localhost:8501/",
                                           "https://fonts.gstatic.com/s/i/a.svg"]


def test_a_lead_visiting_every_page_makes_no_request_to_another_host(tmp_path):
    db = demo_project(tmp_path / "demo.duckdb")
    titles = [spec.title for spec in page_specs(access.Actor("lead", "lead"))]
    with serve_shared(db) as url, browser_page() as page:
        app_host = urlsplit(url).netloc
        addresses: list[str] = []
        page.on("request", lambda request: addresses.append(request.url))
        page.on("websocket", lambda socket: addresses.append(socket.url))
        page.goto(url)
        page.get_by_role("heading", name="Relevance Workbench", exact=True).first.wait_for(timeout=LONG)
        wait_idle(page, LONG, start_within=0)
        links = page.locator("[data-testid='stSidebarNav'] a")
        # each link's text is its icon's name (a ligature of the bundled icon font), then its title
        listed = [links.nth(i).inner_text().strip().split("\n")[-1] for i in range(links.count())]
        assert listed == titles  # a lead's navigation: every page
        for title in titles[1:] + titles[:1]:  # the Overview last: back to the page the visit began on
            open_in_app(page, title, HEADINGS.get(title), LONG)
        # the favicon of the last page is set after its run: wait until the tab has it
        page.wait_for_function("() => !!document.querySelector('link[rel~=\"icon\"]')", timeout=LONG)
        icons = page.eval_on_selector_all("link[rel~='icon']", "links => links.map(l => l.href)")
        assert any(a.startswith(("http://", "ws://")) for a in addresses)  # the recorder saw the app's own
        assert _elsewhere(addresses + icons, app_host) == []
