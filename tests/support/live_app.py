"""Start the real app (``workbench app``) on a free port and drive it with Debian's chromium."""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
import socket
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.prerequisites import REPO, chromium_executable, require

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _output(process: subprocess.Popen) -> str:
    """What a server process printed: its log file (:func:`_start`) or its stdout pipe."""
    log = getattr(process, "log_path", None)
    if log is not None:
        return Path(log).read_text(errors="replace")
    return process.stdout.read() if process.stdout is not None else ""


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"app exited early with code {process.returncode}: {_output(process)}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer /_stcore/health within {timeout} s")


def _start(db_path: Path, env: dict, cwd: Path = REPO,
           prepare: Callable[[int], None] | None = None) -> tuple[subprocess.Popen, str]:
    """Start the app on a free port; a port taken between the probe and the bind is retried.

    Tests run in parallel workers (pytest-xdist), so another worker's server can take the port
    :func:`free_port` found before this one binds it; the app then exits at once. ``prepare``
    is called with the port before each start (to write settings that name it, such as an
    OpenID redirect URI).
    """
    for attempt in range(5):
        port = free_port()
        if prepare is not None:
            prepare(port)
        # The server's output goes to a file, not a pipe: nothing reads a pipe while the tests
        # run, and a server that has printed a pipe's worth (64 KB) would block on its next line.
        log = Path(tempfile.mkstemp(prefix="workbench-app-", suffix=".log")[1])
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "workbench", "--db", str(db_path), "app", "--port", str(port)],
                cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so cleanup reaches every child
            )
        process.log_path = log
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, process)
            return process, url
        except TimeoutError:
            _stop(process)  # not answering in time: stopped, not left running after the tests
            raise
        except RuntimeError as exc:
            log.unlink(missing_ok=True)  # its words are in the error
            if attempt == 4 or "in use" not in str(exc).lower():
                raise
    raise AssertionError("unreachable")


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    else:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
    log = getattr(process, "log_path", None)
    if log is not None:
        Path(log).unlink(missing_ok=True)


@contextmanager
def serve(db_path: Path, extra_env: dict | None = None, cwd: Path | None = None,
          prepare: Callable[[int], None] | None = None) -> Iterator[str]:
    """Run ``python -m workbench --db DB app --port P`` (in ``cwd``, default the repository: the
    app reads ``.streamlit/secrets.toml`` and ``config/workbench.toml`` there); yield its base
    URL; stop it after. ``prepare(port)`` runs before the server starts (see :func:`_start`)."""
    env = dict(os.environ, **(extra_env or {}))
    process, url = _start(db_path, env, REPO if cwd is None else cwd, prepare)
    try:
        yield url
    finally:
        _stop(process)


_SERVERS: dict = {}  # (cwd, extra environment) -> (process, url, link): this process's shared servers


def stop_shared_servers() -> None:
    """Stop this process's shared servers (:func:`serve_shared`). Called at the end of the test
    session (``tests/conftest.py``) and, as a fallback, at exit: a pytest-xdist worker may end
    without running ``atexit`` handlers, and its servers would outlive the run."""
    while _SERVERS:
        process, _, link = _SERVERS.popitem()[1]
        try:
            _stop(process)
        except Exception:  # noqa: BLE001 - one server that would not stop must not keep the others running
            pass
        shutil.rmtree(link.parent, ignore_errors=True)


def _point(link: Path, db_path: Path) -> None:
    """Make ``link`` name ``db_path`` (atomically: a new link renamed over the old one). A WAL
    file beside the link (left by a server connection that died mid-write) is removed first, so
    it is never replayed into another test's project."""
    link.with_name(link.name + ".wal").unlink(missing_ok=True)
    fresh = link.with_name(link.name + ".new")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(Path(db_path).resolve())
    os.replace(fresh, link)


@contextmanager
def serve_shared(db_path: Path, extra_env: dict | None = None, cwd: Path | None = None) -> Iterator[str]:
    """Like :func:`serve`, from a server this process keeps running for every test that asks
    with the same ``extra_env`` and ``cwd`` (stopped when the process exits): a server start
    costs 3-5 s of wall time and 2-3 s of CPU (its start and its first page's imports).

    The server is started on a symbolic link, which each call points at ``db_path``; the app
    opens the project for each unit of page work and resolves the link each time, so the pages
    of this test see this test's file only. Each test's :func:`browser_page` is a fresh browser
    context (a new Streamlit session) and waits, before it closes, until no run of its pages is
    under way, so no run of an earlier test is left to reach the next test's project."""
    env = dict(os.environ, **(extra_env or {}))
    # a server per working directory and per environment the app reads (a test may have set
    # WORKBENCH_* or OPENAI_* for itself); WORKBENCH_DB is the link's, set by `workbench app`
    key = (str(REPO if cwd is None else cwd),
           tuple(sorted((k, v) for k, v in env.items() if k.startswith(("WORKBENCH_", "OPENAI_", "STREAMLIT_"))
                        and k != "WORKBENCH_DB")))
    entry = _SERVERS.get(key)
    if entry is not None and entry[0].poll() is None:
        _point(entry[2], db_path)
    else:
        if not _SERVERS:
            atexit.register(stop_shared_servers)
        link = Path(tempfile.mkdtemp(prefix="workbench-live-")) / "project.duckdb"
        _point(link, db_path)
        process, url = _start(link, env, Path(key[0]))
        entry = _SERVERS[key] = (process, url, link)
    yield entry[1]


#: a page's script run is finished: the app says so and nothing on the page is left stale from it
_FINISHED = ("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
             " return app && app.getAttribute('data-test-script-state') === 'notRunning'"
             " && !document.querySelector('[data-stale=\"true\"]')"
             " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
             " && !document.querySelector('[data-testid=\"stSkeleton\"]'); }")
_NOT_RUNNING = ("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
                " return !app || app.getAttribute('data-test-script-state') !== 'running'; }")
_RUNNING = ("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
            " return app && app.getAttribute('data-test-script-state') === 'running'; }")


#: ms between two checks of a page-state predicate. Playwright's default polling is every
#: animation frame, which makes headless chromium draw 60 frames a second in software for as
#: long as the wait lasts (measured 0.3 s of chromium CPU per 4 s on an idle page, more on one
#: being redrawn); a check every 25 ms is as prompt for a script run of 100 ms or more.
POLL_MS = 25


def wait_idle(page, timeout: float = 180_000, start_within: float = 400) -> None:
    """Until the script run an action started has finished (``timeout`` ms).

    A run can start a moment after the click or the upload that causes it, and a click made
    while a run is under way can be lost, so first wait up to ``start_within`` ms for the run to
    start (an action that starts no run costs that much), then for it to finish."""
    if start_within > 0:  # (0: the caller knows its action started no run, or that one has started)
        try:
            page.wait_for_function(_RUNNING, timeout=start_within, polling=POLL_MS)
        except Exception:  # noqa: BLE001 - playwright's timeout: the run was over already, or never started
            pass
    page.wait_for_function(_FINISHED, timeout=timeout, polling=POLL_MS)


#: how many script runs of the page have ended (its app root's state left "running"), counted by
#: observers this installs (one on each app root it meets; a new page load counts from 0)
_RUNS_ENDED = """() => { const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return window.__workbenchRuns || 0;
  if (window.__workbenchRuns === undefined) window.__workbenchRuns = 0;
  if (!app.__workbenchObserved) {
    app.__workbenchObserved = true;
    new MutationObserver(records => { for (const r of records) if (r.oldValue === 'running') window.__workbenchRuns++; })
      .observe(app, {attributes: true, attributeFilter: ['data-test-script-state'], attributeOldValue: true});
  }
  return window.__workbenchRuns; }"""
_STATE = """() => { const app = document.querySelector('[data-testid="stApp"]');
  return {runs_ended: window.__workbenchRuns, script: app && app.getAttribute('data-test-script-state'),
          stale: document.querySelectorAll('[data-stale="true"]').length,
          status_widget: !!document.querySelector('[data-testid="stStatusWidget"]'),
          skeletons: document.querySelectorAll('[data-testid="stSkeleton"]').length}; }"""


def after_run(page, action: Callable[[], None], what: str, timeout: float = 180_000) -> None:
    """Do ``action`` (a click, a key) once no script run is under way, then wait until a run has
    ended since and the page is finished (:data:`_FINISHED`).

    Unlike :func:`wait_idle`, this does not guess how soon the run starts: on a busy machine the
    run can start later than any fixed wait, and an action taken then lands on a page the run is
    redrawing. An action that starts no run fails after ``timeout`` ms, saying ``what`` it was."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    wait_idle(page, timeout, start_within=0)
    ended = page.evaluate(_RUNS_ENDED)
    action()
    try:
        page.wait_for_function(f"n => ({_RUNS_ENDED})() > n && ({_FINISHED})()", arg=ended,
                               timeout=timeout, polling=POLL_MS)
    except PlaywrightTimeout:
        raise AssertionError(f"no script run of the page ended within {timeout / 1000:.0f} s after {what} "
                             f"(ended before: {ended}; the page now: {page.evaluate(_STATE)})") from None


def enter_value(page, label: str, value: str, timeout: float = 180_000) -> None:
    """Type ``value`` in the text or number box labelled ``label`` and press Enter, as a user does,
    then wait until the run that starts has ended (:func:`after_run`) and check that the box
    still shows ``value`` (a page that drops a typed value fails here, not at a later wait for
    what the value should have drawn). A box showing ``value`` already is left as it is."""
    from playwright.sync_api import expect

    box = page.get_by_label(label, exact=True).first
    wait_idle(page, timeout, start_within=0)
    if box.input_value() == value:  # Enter would change nothing and start no run
        return

    def enter() -> None:
        box.fill(value)
        box.press("Enter")

    try:
        after_run(page, enter, f"typing {value!r} in {label!r} and Enter", timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the box shows {box.input_value()!r}") from None
    expect(box).to_have_value(value, timeout=timeout)


def open_in_app(page, title: str, heading: str | None = None, timeout: float = 180_000) -> None:
    """Open the page ``title`` with its link in the app's sidebar, as a user does, and wait
    until its run has drawn ``heading`` (default ``title``) and finished.

    The same Streamlit session carries on (no reload): a ``page.goto`` loads and starts the
    whole front end again, measured 0.5-1.2 s of chromium CPU more than this for the same page.
    The heading is matched exactly ("Label" is not "Labels needed" of the page left behind)."""
    wait_idle(page, timeout, start_within=0)  # a click made while a run is under way can be lost
    page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=title, exact=True).click()
    page.get_by_role("heading", name=heading or title, exact=True).first.wait_for(timeout=timeout)
    wait_idle(page, timeout, start_within=0)


def choose_option(page, label: str, option: str, timeout: float = 180_000, attempt_ms: float = 10_000,
                  retries: list | None = None) -> None:
    """Choose ``option`` in the select box labelled ``label`` as a user does (open its list, type
    the option, click it), then wait for the run the choice starts; nothing when it is chosen.

    Streamlit's select box (1.67, ``Selectbox`` of its front end) draws a list of more than 25
    options virtualised: only the rows in view exist in the page (11 of the 44 queries of the
    demo's pool), so an option is found by typing it, which filters the list. The typed text is
    dropped, and the whole list shown again, when the box loses the focus or its value changes
    under it (a script run's redraw), and a list can fail to open on a click made while a run
    is under way. So: no run under way first; the exact option (``q002``, not ``q0020``) is
    awaited ``attempt_ms`` at a time, and a list that does not show it is closed and opened
    and typed again until ``timeout`` (each such attempt appended to ``retries``, as what the
    page showed instead); the chosen value is checked."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    box = page.get_by_label(label, exact=True).first
    wait_idle(page, timeout, start_within=0)
    if box.input_value() == option:  # chosen already: choosing it again changes nothing, starts no run
        return
    wanted = page.get_by_role("option", name=option, exact=True).first
    deadline = time.monotonic() + timeout / 1000
    while True:
        box.click()  # opens the list (a pointer press on the box)
        # the whole option at once, as a paste: typed key by key, the list is filtered and drawn
        # again per character (measured 0.23 -> 0.10 s of chromium CPU per choice)
        box.fill(option)
        try:
            wanted.wait_for(timeout=min(attempt_ms, max(1.0, (deadline - time.monotonic()) * 1000)))
            break
        except PlaywrightTimeout:
            shown = [o.inner_text().strip() for o in page.get_by_role("option").all()[:5]]
            if retries is not None:
                retries.append({"label": label, "option": option, "typed": box.input_value(), "shown": shown})
            if time.monotonic() >= deadline:
                raise AssertionError(f"the select box {label!r} never showed the option {option!r} in "
                                     f"{timeout / 1000:.0f} s; typed {box.input_value()!r}, shown {shown}") from None
            page.keyboard.press("Escape")  # close the list, then try again once no run is under way
            wait_idle(page, timeout, start_within=0)
    wanted.click()
    expect(box).to_have_value(option, timeout=timeout)
    wait_idle(page, timeout)


#: the fonts are loaded and the browser has drawn two frames since: what is on the page is painted
_PAINTED = ("() => document.fonts.ready.then(() => new Promise(done =>"
            " requestAnimationFrame(() => requestAnimationFrame(() => done(true)))))")


def painted(page) -> None:
    """Until the page's fonts are loaded and two frames have been drawn (for a screenshot): a
    wait on the browser's state instead of a fixed pause."""
    page.evaluate(_PAINTED)


def open_label_page_as(page, url: str, annotator: str, timeout: float = 60_000) -> None:
    """Open the Label page and type ``annotator`` into its Annotator field, then Enter (which
    moves the focus to the card, so the keys a test presses next go to the card)."""
    page.goto(f"{url}/label")
    box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
    box.wait_for(timeout=timeout)
    box.fill(annotator)
    box.press("Enter")


def script_idle(page, timeout: float = 60_000) -> None:
    """Until no script run is under way and Streamlit's status widget is gone."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def label_as(page, url: str, annotator: str, pairs: int, timeout: float = 60_000) -> None:
    """:func:`open_label_page_as`, then until the card shows a pair of ``pairs`` and the page is
    idle, then a click on the heading: the focus leaves the text box, so keys act on the page."""
    open_label_page_as(page, url, annotator, timeout)
    page.get_by_text(re.compile(rf"Pair \d+ of {pairs}")).wait_for(timeout=timeout)
    script_idle(page, timeout)
    page.get_by_role("heading", name="Label").click()


def wait_for_pair(page, n: int, pairs: int, timeout: float = 60_000) -> None:
    """Until the Label card shows pair ``n`` (1-based) of ``pairs``."""
    page.locator("[data-testid='label-pair']", has_text=f"Pair {n} of {pairs}").wait_for(timeout=timeout)


_SHARED: dict = {}  # this process's Playwright and chromium, started by the first browser_page()
_OPEN_PAGES = [0]  # browser_page() blocks open now (they may nest)


def _resume() -> None:
    """Before Playwright is called: its event loop is this thread's running loop again.

    Playwright's sync API runs its loop in a greenlet of this thread that stays suspended
    *inside* the loop between calls, so the thread keeps a running loop, and ``asyncio.run()``
    (the judge's CLI in process, say) fails with "cannot be called from a running event loop"
    while Playwright is alive. The loop is parked (:func:`_park`) outside :func:`browser_page`
    blocks, when nothing calls Playwright, and put back here."""
    loop = _SHARED.get("loop")
    if loop is not None and asyncio.events._get_running_loop() is None:
        asyncio.events._set_running_loop(loop)


def _park() -> None:
    """After the last open :func:`browser_page`: no running loop left in this thread."""
    loop = asyncio.events._get_running_loop()
    if loop is not None:
        _SHARED["loop"] = loop
    asyncio.events._set_running_loop(None)


def _close_shared() -> None:
    _resume()
    browser, pw = _SHARED.pop("browser", None), _SHARED.pop("playwright", None)
    for close in (getattr(browser, "close", None), getattr(pw, "stop", None)):
        try:
            if close is not None:
                close()
        except Exception:  # noqa: BLE001 - the process is exiting; the driver takes chromium with it
            pass


def shared_browser():
    """This process's chromium (Debian's, never a downloaded browser), launched once: the driver
    and the browser cost 2-3 s of wall time and about 1 s of CPU per launch. Each
    :func:`browser_page` gets a page in it with no cookies, storage or session of another test;
    a browser that went away is launched again.
    Call it inside a :func:`browser_page` block (see :func:`_resume`)."""
    browser = _SHARED.get("browser")
    if browser is not None and browser.is_connected():
        return browser
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "the playwright package is not installed (pip install -e '.[test]')")
    if "playwright" not in _SHARED:
        _SHARED["playwright"] = sync_playwright().start()
        atexit.register(_close_shared)
    browser = _SHARED["playwright"].chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    _SHARED["browser"] = browser
    return browser


#: the page events a test may listen to; their listeners go with the test (:func:`_leave`)
_PAGE_EVENTS = ("console", "dialog", "download", "filechooser", "frameattached", "framedetached",
                "framenavigated", "load", "domcontentloaded", "pageerror", "popup", "request",
                "requestfailed", "requestfinished", "response", "websocket", "worker")
_CLEAR_STORAGE = "() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }"


def _leave(page) -> None:
    """Make a page a test has finished with as good as a new one for the next test: its other
    pages closed, its origin's storage cleared, the Streamlit session ended (``about:blank``),
    the context's cookies and permissions dropped, the test's listeners removed, the default
    timeout put back."""
    context = page.context
    for other in context.pages:
        if other != page:
            other.close()
    page.evaluate(_CLEAR_STORAGE)
    page.goto("about:blank")
    context.clear_cookies()
    context.clear_permissions()
    # Playwright has no public call that removes every listener of an event, so this reaches its
    # implementation object (pyee's remove_all_listeners); if an upgrade breaks it, open a new
    # context per test again (about 3 s more chromium CPU per test).
    for event in _PAGE_EVENTS:
        page._impl_obj.remove_all_listeners(event)
    page.set_default_timeout(30_000)  # Playwright's default


def _reused_page(viewport: dict):
    """The page the last :func:`browser_page` block left (:func:`_leave`), sized ``viewport``;
    None when there is none."""
    page = _SHARED.pop("page", None)
    if page is None or page.is_closed() or not page.context.browser.is_connected():
        return None
    page.set_viewport_size(viewport)
    return page


@contextmanager
def browser_page(viewport: dict | None = None) -> Iterator[object]:
    """A Playwright page of this process's chromium (:func:`shared_browser`) with no cookies,
    storage or Streamlit session from another test, closed or cleared after, once no script run
    of its pages is under way.

    The page of the previous block is used again when it ended cleanly (:func:`_leave`: cookies,
    storage, listeners and session gone), else a new context (a new profile) is opened: a new
    page costs a renderer process and the whole front end parsed and compiled again, measured
    ~3 s more chromium CPU than the same page's next load (4.1 against 1.2 s for the Overview).
    A block inside another one gets a context of its own."""
    _OPEN_PAGES[0] += 1
    _resume()
    size = viewport or {"width": 1400, "height": 1000}
    try:
        page = _reused_page(size) if _OPEN_PAGES[0] == 1 else None
        if page is None:
            page = shared_browser().new_context(viewport=size).new_page()
        context, clean = page.context, False
        try:
            yield page
            clean = True
        finally:
            try:
                for each in context.pages:  # no run of this test left going in a shared server
                    try:
                        each.wait_for_function(_NOT_RUNNING, timeout=30_000, polling=POLL_MS)
                    except Exception:  # noqa: BLE001 - a page stuck or gone: closing it ends its session
                        pass
                if clean and _OPEN_PAGES[0] == 1 and not page.is_closed():
                    try:
                        _leave(page)
                        _SHARED["page"] = page
                    except Exception:  # noqa: BLE001 - not cleared: the next test gets a new context
                        context.close()
                else:
                    context.close()
            except Exception:  # noqa: BLE001 - a crashed browser: the next browser_page() launches another
                if context.browser is not None and context.browser.is_connected():
                    raise
    finally:
        _OPEN_PAGES[0] -= 1
        if _OPEN_PAGES[0] == 0:
            _park()


#: the Label card's current pair has been on screen (the page's own clock) at least ``ms``
_SHOWN_FOR = ("ms => { const w = window.__workbenchLabel;"
              " return !!w && !!w.token && w.shownAt !== null && performance.now() - w.shownAt >= ms; }")


def wait_pair_shown(page, seconds: float, timeout: float = 60_000) -> None:
    """Until the Label card's pair has been on screen ``seconds``, by the card's own clock (the
    one that refuses a grade made too early): instead of sleeping ``seconds`` after the pair
    appeared, which also counts the time the test spent waiting for other things."""
    # polled on animation frames, not POLL_MS: the label key walks time grades against the card's
    # clock to the frame, and these waits last ~0.5 s, so the frames drawn cost little
    page.wait_for_function(_SHOWN_FOR, arg=seconds * 1000, timeout=timeout)


def require_label_rows(path, n: int, read: Callable[[Path], list], page=None, timeout: float = 90.0) -> list:
    """:func:`wait_label_rows`, failing the test when fewer than ``n`` rows came back."""
    rows = wait_label_rows(path, n, read, timeout, page=page)
    if len(rows) < n:
        raise AssertionError(f"fewer than {n} events stored: {rows}")
    return rows


def server_log_tail(url: str, lines: int = 30) -> str:
    """The last ``lines`` lines the shared server at ``url`` printed (:func:`serve_shared`), for a
    failure message: what the app said while the test waited."""
    for process, served, _ in _SERVERS.values():
        if served == url and getattr(process, "log_path", None) is not None:
            try:
                return "\n".join(Path(process.log_path).read_text(errors="replace").splitlines()[-lines:])
            except OSError:
                return ""
    return ""


#: the Label card has nothing on its way: no action in flight or queued, no answer in the
#: browser's outbox (each one handled by the server: stored, or kept on its disk)
_CARD_SETTLED = ("() => { const W = window.__workbenchLabel; let box = [];"
                 " try { box = JSON.parse(localStorage.getItem('wb-label-outbox') || '[]'); } catch (e) { /* */ }"
                 " return !W || (!W.inflight && !W.queue.length && !box.length); }")


def wait_label_rows(path, n: int, read: Callable[[Path], list], timeout: float = 90.0,
                    trace: dict | None = None, page=None) -> list:
    """``read(path)`` (rows read from the project) once it returns ``n`` rows or more, else the
    last rows read when ``timeout`` seconds have passed. The project file is opened only while
    no answer waits in its write-ahead folder, and at most once a second: a test that opened it
    every 0.2 s kept the app's short opens of a key press (0.5 s) from getting the file on a
    loaded machine, so the answer it waited for was stored only after the wait gave up.

    With ``page`` (a Label page), the file is not opened at all until the card has nothing on
    its way (:data:`_CARD_SETTLED`, looked at in the browser): reads once a second still kept
    the app from the file for 90 s in quiet full runs (each read opens it read-write and
    checkpoints on close), and the press was handled the moment the reads stopped."""
    from workbench.services.calibration import pending

    deadline = time.monotonic() + timeout
    rows: list = []
    trace = {} if trace is None else trace  # why the wait saw no rows: for a failure message
    if page is not None:
        try:
            page.wait_for_function(_CARD_SETTLED, timeout=timeout * 1000, polling=250)
        except Exception:  # noqa: BLE001 - still on its way: the reads below say what is stored
            trace["card still sending"] = True
    while time.monotonic() < deadline:
        if not pending.waiting(path):
            try:
                rows = read(Path(path))
                trace["reads"] = trace.get("reads", 0) + 1
            except Exception as exc:  # noqa: BLE001 - the app holds the file this instant
                trace["failed reads"] = trace.get("failed reads", 0) + 1
                trace["last error"] = str(exc).splitlines()[0][:200]
            if len(rows) >= n:
                return rows
        else:
            trace["answers kept"] = trace.get("answers kept", 0) + 1
        time.sleep(1.0)
    return rows
