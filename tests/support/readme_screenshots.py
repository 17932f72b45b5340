"""Take the README walkthrough's screenshots from the real app on the demo project.

    .venv/bin/workbench --db /tmp/shots.duckdb init --demo
    .venv/bin/workbench --db /tmp/shots.duckdb app --port 8577 &
    .venv/bin/python -m tests.support.readme_screenshots http://127.0.0.1:8577 docs/images

It follows the README's walkthrough (Overview, Judge: Start, Calibration: Draw sample, Label:
five grades by key, Calibration, Evaluate) in Debian's chromium and writes ``overview.png``,
``label.png`` and ``calibration.png``, reduced to a 128-colour palette so each stays small.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.support.live_app import CHROMIUM_ARGS, painted, wait_idle
from tests.support.prerequisites import chromium_executable

LONG = 180_000


def _idle(page) -> None:
    """Until the run that drew what the caller waited for has finished and the page is painted."""
    page.wait_for_selector("[data-testid='stApp']", timeout=LONG)
    wait_idle(page, LONG, start_within=0)
    painted(page)


def _open(page, url: str, path: str, heading: str) -> None:
    page.goto(f"{url}/{path}")
    page.get_by_role("heading", name=heading).first.wait_for(timeout=LONG)
    _idle(page)


def _shot(page, folder: Path, name: str) -> Path:
    from PIL import Image

    path = folder / f"{name}.png"
    page.wait_for_function("() => document.fonts.status === 'loaded'")
    page.evaluate("() => { document.activeElement && document.activeElement.blur();"  # no focus ring
                  " document.querySelectorAll('*').forEach(e => { if (e.scrollTop) e.scrollTop = 0; }); }")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    Image.open(path).convert("RGB").quantize(colors=128).save(path, optimize=True)
    print(f"{path}: {path.stat().st_size / 1024:.0f} KB")
    return path


def take(url: str, folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 960})
        page.goto(url)
        page.get_by_text("Pipeline").wait_for(timeout=LONG)
        _idle(page)
        _shot(page, folder, "overview")

        _open(page, url, "judge", "Judge")
        page.get_by_text("What the judge sees").wait_for(timeout=LONG)
        page.get_by_role("button", name="Start").click()
        page.get_by_text(re.compile(r"\b([\d,]+) of \1 judged")).first.wait_for(timeout=LONG)
        _idle(page)

        _open(page, url, "calibration", "Calibration")
        form = page.locator("[data-testid='stForm']").filter(has=page.get_by_role("button", name="Draw sample"))
        form.get_by_role("button", name="Draw sample").click()
        page.get_by_text(re.compile(r"Drew sample")).first.wait_for(timeout=LONG)
        _idle(page)

        _open(page, url, "label", "Label")
        box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
        box.fill("sme-1")
        box.press("Enter")
        page.get_by_text(re.compile(r"Pair \d+ of \d+")).wait_for(timeout=LONG)
        _idle(page)
        page.get_by_role("heading", name="Label").click()  # keys act on the page, not the box
        for n, grade in enumerate([0, 1, 0], start=1):
            page.keyboard.press(str(grade))
            page.get_by_text(re.compile(rf"\b{n} labelled")).first.wait_for(timeout=LONG)
            _idle(page)
        _shot(page, folder, "label")

        _open(page, url, "calibration", "Calibration")
        page.locator("[data-testid='calibration-verdict']").wait_for(state="attached", timeout=LONG)
        _idle(page)
        _shot(page, folder, "calibration")
        browser.close()


if __name__ == "__main__":
    take(sys.argv[1], Path(sys.argv[2]))
