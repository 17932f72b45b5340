"""How fast the Label page shows the next pair after a grade key, with a million judgments stored.

Builds a project in a temporary DuckDB file with ``--judgments`` LLM judgments (default
1,000,000) over a document-level pool of the same size and draws a 200-pair calibration sample.
Then it measures:

1. **The browser** (what the SME waits for): a real ``workbench app`` server and Debian's
   chromium (Playwright), while a real judge job (``workbench judge`` against the loopback
   OpenAI-compatible server of ``tests/support/openai_server.py``, 50 ms per answer) grades
   the same project's pool in another process and writes its batches to the same file. A
   scripted expert labels ``--presses`` pairs with the keyboard only: a seeded mix of grades
   0–3, grades 2 and 3 with one evidence sentence (``Space`` then the grade, now and then
   ``j`` first to take the second sentence). For each label the browser's clock measures from
   the grade key to the moment the next pair's header and query text are on screen, per kind
   of label; the expert reads each pair ``--think`` seconds (at least the page's minimum
   on-screen time) and does not wait for the server. Afterwards every label must be stored
   with its evidence, and labels per hour are worked out from the stored time on task and
   from the session's wall clock.
   The server writes how long each phase of its work took (``WORKBENCH_LABEL_TIMINGS``,
   :mod:`workbench.ui.views.label`): drawing the card, opening the project, storing the answer,
   reading ahead, closing, and the card's whole run.
2. **The services** on an open project (the figure measured before the page was reworked):
   store a label, then read the next pair (``save_label`` + ``next_item`` + ``my_state`` +
   ``progress``); and what the page now does per key press after drawing, on a project
   opened and closed each time (``open_for_labelling`` + ``save_label`` + ``labelling_view``,
   grades 0–3 with evidence on 2–3, read ahead as deep as the card holds), phase by phase.

The same presses on a bare Streamlit page (a fragment with a pair header and two grade keys,
no project) are the peer measured alongside: what Streamlit and the browser take at this load
with no project behind the page. (It is a reference, not a strict lower bound: on the loaded
2-core machine it came out slower at p50 than the Label page itself.)
``--baseline DIR`` measures the browser part a second time against another checkout of the
workbench (for example ``git archive`` of an older commit unpacked in DIR), on a copy of the same
project, so the two page designs are compared in the same run and under the same load: the same
scripted expert and judge job when that checkout's page takes evidence keys, grade keys 0/1
otherwise.
The load average is printed with every figure: the machine is shared, and figures taken at a
load above the number of cores (or under ``nice``) are slower than on an idle one. The bar is
p95 < 150 ms.

    python benchmarks/label_bench.py [--judgments 1000000] [--presses 100] [--labels 150]
                                     [--think 1.0] [--no-judge-job] [--no-peer] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.live_app import browser_page, free_port, wait_healthy
from workbench.services.calibration import workflow as cal
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database, insert_frame
from workbench.store.judgments import write_judgments
from workbench.store.pools import create_pool
from workbench.ui.views.label import AHEAD, OPEN_WAIT, TIMINGS_ENV, sentences

BAR_MS = 150.0


def build(path: Path, n: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    queries = 500
    started = time.perf_counter()
    db = Database(path)
    # every passage its own text, so the judge job below finds nothing in its cache and keeps running
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "title": "t",
                         "text": [f"Passage {i}. " + "Some passage text about a topic. " * 20 for i in range(n)]})
    qids = [f"q{i % queries}" for i in range(n)]
    with db.transaction() as tx:
        write_documents(tx, docs)
        write_queries(tx, pd.DataFrame({"query_id": [f"q{i}" for i in range(queries)],
                                        "text": [f"topic {i}" for i in range(queries)]}))
        create_pool(tx, "p", level="doc", chunking=None, depth=100, runs=["r"])
        insert_frame(tx, "pool_pairs", pd.DataFrame({"pool": "p", "query_id": qids, "doc_id": docs["doc_id"],
                                                     "chunk_id": None, "priority": 1, "rrf_score": 1.0}))
        write_judgments(tx, pd.DataFrame({"query_id": qids, "doc_id": docs["doc_id"], "start": 0, "end": 660,
                                          "grade": rng.integers(0, 4, n), "source": "llm", "assessor": "judge",
                                          "model": "m", "status": "ok"}))
    db.close()
    return time.perf_counter() - started


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def stats(ms) -> str:
    ms = np.asarray(ms, dtype=float)
    return (f"p50 {np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms, "
            f"max {ms.max():.0f} ms (n={len(ms)})")


# -- services --------------------------------------------------------------------------------

def service_times(path: Path, labels: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(old round trip on an open project, the page's per-press work with its own open/close:
    ``{"open", "store", "read", "close", "total"}`` ms arrays). The per-press loop does what the
    page's key press does: grades 0–3 (2–3 with the first evidence sentence, evidence required),
    the read ahead as deep as the card holds, the items the session holds already skipped."""
    db = Database(path)
    old = []
    try:
        item = cal.next_item(db, "s", "sme")
        for i in range(labels):
            t = time.perf_counter()
            cal.save_label(db, "s", "sme", item["position"], i % 4, seconds=1.0)
            item = cal.next_item(db, "s", "sme", after=item["position"])
            cal.my_state(db, "s", "sme", item["position"])
            cal.progress(db, "s", "sme")
            old.append((time.perf_counter() - t) * 1000)
    finally:
        db.close()
    now: dict[str, list[float]] = defaultdict(list)
    db = cal.open_for_labelling(path, migrate=True)
    try:
        view = cal.labelling_view(db, "s", "sme2", depth=AHEAD)
    finally:
        db.close()
    items = dict(view["items"])
    for i in range(labels):
        position = view["position"]
        if position is None:
            break
        grade = i % 4
        first = sentences(items[position])[0]
        t0 = time.perf_counter()
        db = cal.open_for_labelling(path, wait=OPEN_WAIT)
        t1 = time.perf_counter()
        try:
            cal.save_label(db, "s", "sme2", position, grade, seconds=1.0, require_evidence=True,
                           evidence=[[first[0], first[1]]] if grade >= 2 else None)
            t2 = time.perf_counter()
            view = cal.labelling_view(db, "s", "sme2", after=position, have=items.keys(), depth=AHEAD)
            t3 = time.perf_counter()
        finally:
            db.close()
        t4 = time.perf_counter()
        items.update(view["items"])
        for phase, ms in zip(("open", "store", "read", "close", "total"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
            now[phase].append(ms * 1000)
    return np.array(old), {k: np.array(v) for k, v in now.items()}


# -- the browser -----------------------------------------------------------------------------

# Registered before the first press: the browser's clock at every key press.
WATCH = """() => {
  window.__presses = [];
  window.addEventListener('keydown', () => window.__presses.push(performance.now()), true);
}"""
# True (the time) once the next pair's header and query text are on screen (the header is a
# `label-pair` block now, a bold markdown line in older checkouts).
SHOWN = """([pair, query]) => {
  const header = document.querySelector('[data-testid="label-pair"]') ||
      Array.from(document.querySelectorAll('[data-testid="stMarkdownContainer"] strong'))
          .find(el => /^Pair \\d+ of \\d+$/.test(el.textContent));
  const q = document.querySelector('[data-testid="label-query"]');
  if (!header || !q || !document.querySelector('[data-testid="label-passage"]')) return false;
  return header.textContent === pair && q.textContent === query ? performance.now() : false;
}"""

# The peer: a Streamlit page holding nothing but a pair header, a query line and two grade keys
# in a fragment (no project, no storing). What Streamlit and the browser alone take on this
# machine at this load, for the same key press → text on screen.
FLOOR_APP = """
import streamlit as st

st.session_state.setdefault("n", 0)


def bump():
    st.session_state.n += 1


@st.fragment
def card():
    n = st.session_state.n + 1
    st.html(f'<div data-testid="label-pair">Pair {n} of 999</div><div data-testid="label-query">q{n}</div>'
            f'<span data-testid="label-passage">passage</span>')
    st.button("0", key="g0", shortcut="0", on_click=bump)
    st.button("1", key="g1", shortcut="1", on_click=bump)


st.title("Floor")
card()
"""


@contextmanager
def serve(repo: Path, db_path: Path | None, env: dict, script: Path | None = None):
    """``python -m workbench --db DB app`` run from ``repo`` (its own workbench package), or
    ``streamlit run SCRIPT`` when a script is given."""
    port = free_port()
    command = ([sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
                "--server.headless", "true", "--browser.gatherUsageStats", "false"] if script else
               [sys.executable, "-m", "workbench", "--db", str(db_path), "app", "--port", str(port)])
    process = subprocess.Popen(
        command, cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo), **env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout=120)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


def _idle(page) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=120_000)


@contextmanager
def judge_job(path: Path, enabled: bool = True):
    """A judge job grading pool ``p`` with a model the project has no grades of, against the
    loopback OpenAI-compatible server, in processes of their own; yields a callable telling
    whether the job still runs."""
    if not enabled:
        yield lambda: None
        return
    server = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server", "--latency", "0.05"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    job = None
    try:
        base_url = server.stdout.readline().strip()
        env = dict(os.environ, OPENAI_API_KEY="bench", PYTHONPATH=str(REPO))
        job = subprocess.Popen([sys.executable, "-m", "workbench", "--db", str(path), "judge", "--pool", "p",
                                "--model", "bench-judge", "--base-url", base_url],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        time.sleep(3.0)  # under way (its first batch written) before the SME starts
        if job.poll() is not None:
            raise RuntimeError(f"the judge job ended at once: {job.stderr.read()[-2000:]}")
        yield lambda: job.poll() is None
    finally:
        for process in (job, server):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGINT if process is job else signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=20)


def browser_times(repo: Path, path: Path, presses: int, think: float, annotator: str,
                  timings: Path, *, expert: bool = False, job: bool = False) -> tuple[np.ndarray, int, list[str]]:
    """Key press → next pair on screen, in the browser; (times, labels stored, load readings)."""
    db = Database(path)
    try:
        queries = dict(db.query_all("SELECT i.position, q.text FROM calibration_items i "
                                    "JOIN queries q USING (query_id) WHERE i.sample = 's'"))
    finally:
        db.close()
    total = len(queries)
    presses = min(presses, total - 1)
    with serve(repo, path, {TIMINGS_ENV: str(timings)}) as url, browser_page() as page:
        page.goto(f"{url}/label")
        box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
        box.wait_for(timeout=120_000)
        box.fill(annotator)
        box.press("Enter")
        page.get_by_text(re.compile(r"Pair 1 of \d+")).wait_for(timeout=120_000)
        _idle(page)
        page.get_by_role("heading", name="Label").click()  # grade keys act on the page, not a text box
        timings.write_text("")  # only the presses' phases from here on
        expected = lambda i: (f"Pair {i + 2} of {total}", queries[i + 1])  # noqa: E731
        with judge_job(path, job) as running:
            if expert:
                out, loads = expert_loop(page, presses, think, expected)
            else:
                out, loads = press_loop(page, presses, think, expected)
            still = running()
        if still is not None:
            loads.append(f"the judge job was {'still running' if still else 'NOT running'} at the last label")
    if expert:
        return out, expert_stored(path, annotator, out), loads
    db = Database(path, read_only=True)
    try:
        stored = db.query_value("SELECT count(*) FROM label_events WHERE annotator = ? AND action = 'label'",
                                [annotator])
    finally:
        db.close()
    return np.array(out), int(stored), loads


def press_loop(page, presses: int, think: float, expected) -> tuple[np.ndarray, list[str]]:
    """Press grade keys 0/1 in turn; each time, the browser's time from the key press to the
    moment ``expected(i)`` (pair header, query text) is on screen."""
    page.evaluate(WATCH)
    out, loads = [], []
    for i in range(presses):
        _idle(page)
        time.sleep(think)
        if i % 25 == 0:
            loads.append(load())
        page.keyboard.press(str(i % 2))
        shown = page.wait_for_function(SHOWN, arg=list(expected(i)), polling="raf", timeout=120_000).json_value()
        out.append(shown - page.evaluate("() => window.__presses[window.__presses.length - 1]"))
    _idle(page)
    return np.array(out), loads


def expert_plan(n: int, seed: int = 7) -> list[tuple[str, list[str]]]:
    """The scripted expert's labels: (kind, keys) per pair, a seeded mix of grades 0–3 (2 and 3
    with one evidence sentence: ``Space`` then the grade, a quarter of them ``j`` first)."""
    rng = np.random.default_rng(seed)
    plan = []
    for grade in rng.choice(4, size=n, p=[0.3, 0.25, 0.25, 0.2]):
        if grade < 2:
            plan.append(("0/1, one key", [str(grade)]))
        elif rng.random() < 0.25:
            plan.append(("2/3 + evidence", ["j", "Space", str(grade)]))
        else:
            plan.append(("2/3 + evidence", ["Space", str(grade)]))
    return plan


def expert_loop(page, labels: int, think: float, expected) -> tuple[dict, list[str]]:
    """The scripted expert (keys only): per label, the browser's time from the grade key to the
    next pair on screen; returns ({kind: ms array, "wall": seconds, "plan": plan}, loads)."""
    page.evaluate(WATCH)
    plan = expert_plan(labels)
    out: dict = defaultdict(list)
    loads = []
    started = time.perf_counter()
    for i, (kind, keys) in enumerate(plan):
        if i % 25 == 0:
            loads.append(load())
        time.sleep(think)  # reading the pair (never less than the page's minimum on-screen time)
        for attempt in range(4):
            for key in keys:
                page.keyboard.press(key)
            try:
                shown = page.wait_for_function(SHOWN, arg=list(expected(i)), polling="raf",
                                               timeout=40_000).json_value()
                break
            except Exception:
                said = (page.locator("[data-testid=label-key-note]").all_inner_texts()
                        + page.locator("[data-testid=stAlert]").all_inner_texts())
                card = page.evaluate("() => { const W = window.__workbenchLabel || {}; return {token: W.token, "
                                     "sent: W.sent, inflight: W.inflight, queued: (W.queue || []).length, "
                                     "next: W.next && W.next.token, pair: (document.querySelector("
                                     "'[data-testid=label-pair]') || {}).textContent}; }")
                print(f"label {i + 1} ({keys}) did not move on: {said}; the card: {card}", file=sys.stderr)
                if attempt == 3 or not any("again" in text for text in said):
                    raise
                out["refused, pressed again"].append(1)  # as an SME would: the page asked for it
                _idle(page)
                time.sleep(think)
        out[kind].append(shown - page.evaluate("() => window.__presses[window.__presses.length - 1]"))
    wall = time.perf_counter() - started
    _idle(page)
    page.get_by_text(re.compile(rf"Saved grade \d for pair {labels}\b")).wait_for(timeout=120_000)
    _idle(page)
    result = {k: np.array(v) for k, v in out.items() if k != "refused, pressed again"}
    result["retries"] = len(out.get("refused, pressed again", []))
    result["wall"] = wall
    result["plan"] = plan
    return result, loads


def expert_stored(path: Path, annotator: str, out: dict) -> int:
    """How many of the expert's labels are stored as pressed (grade, and one evidence span on
    grades 2–3); the time on task is kept in ``out["seconds"]``."""
    db = Database(path, read_only=True)
    try:
        rows = db.query_all("SELECT position, grade, evidence::VARCHAR, seconds FROM label_events "
                            "WHERE annotator = ? AND action = 'label' ORDER BY event_id", [annotator])
    finally:
        db.close()
    out["seconds"] = [r[3] for r in rows if r[3] is not None]
    good = 0
    for (kind, keys), (position, grade, evidence, _) in zip(out["plan"], rows):
        spans = json.loads(evidence) if evidence else []
        if grade == int(keys[-1]) and len(spans) == (1 if grade >= 2 else 0):
            good += 1
    return good


def report_expert(ms: dict, stored: int, loads: list[str], timings: Path) -> None:
    plan = ms["plan"]
    every = np.concatenate([v for k, v in ms.items() if isinstance(v, np.ndarray)])
    verdict = "meets" if np.percentile(every, 95) <= BAR_MS else "misses"
    print(f"scripted expert, keys only, {len(plan)} labels: grade key -> next pair on screen (browser clock): "
          f"{stats(every)}; {verdict} the bar (p95 <= {BAR_MS:.0f} ms); {stored} of {len(plan)} stored as pressed")
    for kind, values in ms.items():
        if isinstance(values, np.ndarray):
            keys = np.mean([len(k) for c, k in plan if c == kind])
            print(f"  {kind:<16} ({len(values)} labels, {keys:.2f} keys each): {stats(values)}")
    seconds = ms.get("seconds") or []
    if seconds:
        print(f"  labels per hour, from the stored time on task: {3600 * len(seconds) / sum(seconds):,.0f} "
              f"(median {np.median(seconds):.2f} s per label)")
    print(f"  labels per hour, from the session's wall clock: {3600 * len(plan) / ms['wall']:,.0f}")
    print(f"  answers the page refused and asked for again: {ms['retries']}")
    for reading in loads:
        print(f"  during the labels: {reading}")
    report_phases(timings, "action")


def floor_times(folder: Path, presses: int, think: float) -> tuple[np.ndarray, list[str]]:
    script = folder / "floor_app.py"
    script.write_text(FLOOR_APP)
    with serve(folder, None, {}, script=script) as url, browser_page() as page:
        page.goto(url)
        page.get_by_text("Pair 1 of 999").wait_for(timeout=120_000)
        _idle(page)
        page.get_by_role("heading", name="Floor").click()
        return press_loop(page, presses, think, lambda i: (f"Pair {i + 2} of 999", f"q{i + 2}"))


PHASES = ("draw", "open", "store", "read", "close", "card run")  # in the order of a key press's work


def phases(timings: Path) -> dict[str, list[float]]:
    found: dict[str, list[float]] = defaultdict(list)
    for line in timings.read_text().splitlines() if timings.exists() else []:
        row = json.loads(line)
        found[row["phase"]].append(row["ms"])
    return found


def report_phases(timings: Path, per: str) -> None:
    """Every phase the server wrote: those of a key press in their order, then any other (a
    checkout may name its phases otherwise); never a heading with nothing under it."""
    found = phases(timings)
    if not found:
        print(f"  (no server phase timings in {timings.name}: this checkout writes none)")
        return
    print(f"  server phases per {per} (from the server's own clock):")
    for phase in [p for p in PHASES if found.get(p)] + sorted(set(found) - set(PHASES)):
        print(f"    {phase:<9} {stats(found[phase])}")


def report_browser(name: str, ms: np.ndarray, stored: int, loads: list[str], timings: Path) -> None:
    verdict = "meets" if np.percentile(ms, 95) < BAR_MS else "misses"
    print(f"{name}: grade key -> next pair on screen (browser clock): {stats(ms)}; {verdict} the bar "
          f"(p95 < {BAR_MS:.0f} ms); {stored} of {len(ms)} presses stored")
    for reading in loads:
        print(f"  during the presses: {reading}")
    report_phases(timings, "press")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--presses", type=int, default=100, help="grade keys pressed in the browser")
    parser.add_argument("--think", type=float, default=1.0,
                        help="seconds the expert reads each pair (1 s: 6x faster than the 600 labels/hour target)")
    parser.add_argument("--no-judge-job", action="store_true", help="no judge job running meanwhile")
    parser.add_argument("--no-peer", action="store_true", help="skip the bare Streamlit page")
    parser.add_argument("--labels", type=int, default=150, help="pairs labelled through the services")
    parser.add_argument("--baseline", type=Path, help="another checkout whose page is measured as well")
    args = parser.parse_args()
    print(f"start: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "bench.duckdb"
        built = build(path, args.judgments)
        db = Database(path)
        try:
            t = time.perf_counter()
            cal.create_sample(db, "s", "p", seed=1)
            drawn = time.perf_counter() - t
            stored = db.query_value("SELECT count(*) FROM judgments")
        finally:
            db.close()
        print(f"project with {stored:,} judgments built in {built:.1f} s; 200-pair sample drawn in "
              f"{drawn * 1000:.0f} ms")
        pristine = tmp / "pristine.duckdb"
        shutil.copy(path, pristine)

        print(f"browser, this checkout, {'with' if not args.no_judge_job else 'without'} a judge job: {load()}")
        found, stored, loads = browser_times(REPO, path, args.presses, args.think, "browser-sme",
                                             tmp / "timings.jsonl", expert=True, job=not args.no_judge_job)
        report_expert(found, stored, loads, tmp / "timings.jsonl")
        ms = np.concatenate([v for v in found.values() if isinstance(v, np.ndarray)])
        if not args.no_peer:
            print(f"browser, peer (a bare Streamlit page): {load()}")
            floor, floor_loads = floor_times(tmp, args.presses, args.think)
            print(f"peer: a bare Streamlit fragment, key -> text on screen: {stats(floor)}")
            for reading in floor_loads:
                print(f"  during the presses: {reading}")
            print(f"p95 this checkout / peer: {np.percentile(ms, 95) / np.percentile(floor, 95):.1f}x; "
                  f"p50: {np.percentile(ms, 50) / np.percentile(floor, 50):.1f}x")
        if args.baseline:
            other = tmp / "baseline.duckdb"
            shutil.copy(pristine, other)
            # the same expert and the same judge job when the baseline's page takes evidence keys
            # (its card is label_card.js); an older page gets grade keys 0/1 only
            expert = (args.baseline / "workbench" / "ui" / "views" / "label_card.js").is_file()
            print(f"browser, baseline {args.baseline}, {'with' if not args.no_judge_job else 'without'} a judge "
                  f"job: {load()}")
            found_b, stored_b, loads_b = browser_times(args.baseline.resolve(), other, args.presses, args.think,
                                                       "browser-sme", tmp / "baseline.jsonl", expert=expert,
                                                       job=not args.no_judge_job)
            if expert:
                print("baseline:", end=" ")
                report_expert(found_b, stored_b, loads_b, tmp / "baseline.jsonl")
                ms_b = np.concatenate([v for v in found_b.values() if isinstance(v, np.ndarray)])
            else:
                ms_b = found_b
                report_browser("baseline", ms_b, stored_b, loads_b, tmp / "baseline.jsonl")
            print(f"p95 baseline / this checkout: {np.percentile(ms_b, 95) / np.percentile(ms, 95):.1f}x; "
                  f"p50: {np.percentile(ms_b, 50) / np.percentile(ms, 50):.1f}x")

        print(f"services: {load()}")
        old, now = service_times(pristine, args.labels)
        print(f"services on an open project, store a label + read the next pair (the earlier figure): {stats(old)}")
        print(f"the page's work per key press after drawing (open, store, read ahead, close): {stats(now['total'])}")
        for phase in ("open", "store", "read", "close"):
            print(f"    {phase:<9} {stats(now[phase])}")
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
