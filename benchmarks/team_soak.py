"""A team on one server: 8 SMEs labelling in Chromium while a judge job, run imports and a
background chunking job write to the same project.

Builds a project in a temporary folder (``--pairs`` documents, one document-level pool over them
with random LLM grades, as ``benchmarks/label_bench.py`` builds it) and draws a ``--sample``-pair
calibration sample. One ``workbench app`` server on loopback serves it (sign-in ``none``: each
SME types a name). Then, in the same run and against the same server:

1. **Solo** (the peer): one scripted SME labels alone for ``--solo-seconds``, nothing else running.
2. **Team**: ``--smes`` scripted SMEs (one Chromium, one browser context each, driven
   concurrently) label for ``--minutes`` while (a) a judge job (``workbench judge`` against the
   loopback OpenAI-compatible server of ``tests/support/openai_server.py``, 50 ms per answer)
   grades the pool with a model the project has no grades of, (b) every ``--import-every``
   seconds ``workbench import run`` imports a new TREC run of 10 documents per query (retried,
   as an operator would, while the project is locked: exit 5), and (c) a background chunking job
   (:mod:`workbench.services.jobs`) chunks every document into a new chunking.

Each SME is the scripted expert of ``label_bench``: keys only, a seeded mix of grades 0-3 (2 and
3 with one evidence sentence), ``--think`` seconds reading each pair. The browser's clock measures
each grade key to the moment the next pair's header and query are on screen (next-pair latency).

At the end, with the server still running until the Label page's write-ahead folder has drained,
every SME's labels are read back: labels stored must equal labels given, with no position stored
twice and each stored grade the one pressed. The report gives next-pair latency p50/p95 of the team
against the solo figure (ratios), labels per SME, what the judge, imports and the background job
did, and the load average sampled every 15 s (the machine is shared: say its load with every
figure).

    python benchmarks/team_soak.py [--minutes 10] [--smes 8] [--think 3] [--pairs 60000]
                                   [--sample 400] [--solo-seconds 60] [--import-every 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from label_bench import SHOWN, WATCH, build, expert_plan, judge_job, load, serve  # noqa: E402

from tests.support.live_app import CHROMIUM_ARGS  # noqa: E402
from workbench.services import jobs  # noqa: E402
from workbench.services.calibration import workflow as cal  # noqa: E402
from workbench.store.database import Database  # noqa: E402

LONG_MS = 120_000


def stats(ms) -> str:
    ms = np.asarray(ms, dtype=float)
    if not len(ms):
        return "no labels"
    return f"p50 {np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms, max {ms.max():.0f} ms (n={len(ms)})"


class Loads:
    """The 1-minute load average every ``every`` seconds while the team phase runs."""

    def __init__(self, every: float = 15.0):
        self.every, self.values, self.stop = every, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.values.append(os.getloadavg()[0])
            self.stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def words(self) -> str:
        v = np.array(self.values)
        return (f"1-min load average sampled every {self.every:g} s: median {np.median(v):.1f}, "
                f"min {v.min():.1f}, max {v.max():.1f} (n={len(v)}) on {os.cpu_count()} cores")


class Importer:
    """Every ``every`` seconds, ``workbench import run`` of a new run (10 documents per query),
    retried while the project is locked (exit 5)."""

    def __init__(self, path: Path, folder: Path, every: float):
        self.path, self.folder, self.every = path, folder, every
        self.imported, self.locked, self.failed, self.seconds = 0, 0, [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        with Database(path, read_only=True, wait=60) as db:
            self.pairs = db.query_all("SELECT query_id, doc_id FROM pool_pairs WHERE pool = 'p' ORDER BY query_id, doc_id")

    def _file(self, n: int) -> Path:
        rng = np.random.default_rng(n)
        by_query: dict[str, list[str]] = {}
        for q, d in self.pairs:
            by_query.setdefault(q, []).append(d)
        lines = []
        for q, docs in by_query.items():
            for rank, d in enumerate(rng.permutation(docs)[:10], start=1):
                lines.append(f"{q} Q0 {d} {rank} {1.0 / rank:.4f} soak{n}")
        out = self.folder / f"soak{n}.trec"
        out.write_text("\n".join(lines) + "\n")
        return out

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            run_file = self._file(n)
            started = time.perf_counter()
            while not self.stop.is_set():
                done = subprocess.run([sys.executable, "-m", "workbench", "--db", str(self.path), "import", "run",
                                       str(run_file), "--name", f"soak{n}"], cwd=REPO,
                                      env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True)
                if done.returncode == 0:
                    self.imported += 1
                    self.seconds.append(time.perf_counter() - started)
                    break
                if done.returncode == 5:
                    self.locked += 1
                    time.sleep(0.5)
                    continue
                self.failed.append(done.stderr.strip()[-300:])
                break
            self.stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


async def _idle(page) -> None:
    await page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=LONG_MS)


async def sme(browser, url: str, name: str, seconds: float, think: float, queries: dict[int, str],
              total: int, seed: int, start: asyncio.Event, ready: list) -> dict:
    """One scripted SME labelling for ``seconds``: the next-pair times (ms), the labels given
    ({position: grade}), and the presses the page refused and that were pressed again."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(LONG_MS)
    context.set_default_navigation_timeout(LONG_MS)
    page = await context.new_page()
    out = {"name": name, "ms": [], "given": {}, "again": 0, "error": None}
    try:
        await page.goto(f"{url}/label")
        box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
        await box.wait_for(timeout=LONG_MS)
        await box.fill(name)
        await box.press("Enter")
        # a new id while the project knows other annotators is asked about once (Label page)
        card = page.get_by_text(re.compile(r"Pair 1 of \d+"))
        confirm = page.get_by_role("button", name=f"Yes, start labelling as {name}")
        await card.or_(confirm).first.wait_for(timeout=LONG_MS)
        if await confirm.count():
            await confirm.click()
        await card.wait_for(timeout=LONG_MS)
        await _idle(page)
        await page.get_by_role("heading", name="Label").click()
        await page.evaluate(WATCH)
        ready.append(name)
        await start.wait()
        plan = expert_plan(total - 1, seed=seed)
        deadline = time.monotonic() + seconds
        rng = np.random.default_rng(seed)
        for i, (_kind, keys) in enumerate(plan):
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(think * float(rng.uniform(0.8, 1.2)))
            expected = [f"Pair {i + 2} of {total}", queries[i + 1]]
            for attempt in range(4):
                for key in keys:
                    await page.keyboard.press(key)
                try:
                    handle = await page.wait_for_function(SHOWN, arg=expected, polling="raf", timeout=60_000)
                    shown = await handle.json_value()
                    break
                except Exception:
                    said = (await page.locator("[data-testid=label-key-note]").all_inner_texts()
                            + await page.locator("[data-testid=stAlert]").all_inner_texts())
                    if attempt == 3 or not any("again" in text for text in said):
                        raise RuntimeError(f"{name}: label {i + 1} did not move on: {said}") from None
                    out["again"] += 1
                    await _idle(page)
                    await asyncio.sleep(think)
            pressed = await page.evaluate("() => window.__presses[window.__presses.length - 1]")
            out["ms"].append(shown - pressed)
            out["given"][i] = int(keys[-1])
        await _idle(page)
    except Exception as exc:  # noqa: BLE001 - reported, and the labels given so far are still checked
        out["error"] = str(exc)[:500]
    finally:
        await context.close()
    return out


async def smes(url: str, names: list[str], seconds: float, think: float, queries: dict[int, str],
               total: int, on_ready=None) -> list[dict]:
    """The SMEs open their pages one after the other (each on its first pair before the next
    opens), then ``on_ready()`` runs (the team's other load starts), then all label at once."""
    from playwright.async_api import async_playwright

    executable = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            start, ready, tasks = asyncio.Event(), [], []
            for k, name in enumerate(names):  # opening 8 pages is not labelling: one at a time, before the clock
                tasks.append(asyncio.create_task(sme(browser, url, name, seconds, think, queries, total, seed=7 + k,
                                                     start=start, ready=ready)))
                while len(ready) <= k and not tasks[-1].done():
                    await asyncio.sleep(0.2)
            if on_ready is not None:
                on_ready()
            start.set()
            began = time.monotonic()
            out = list(await asyncio.gather(*tasks))
            for r in out:
                r["window"] = time.monotonic() - began  # the labelling window (pages opened before it)
            return out
        finally:
            await browser.close()


def stored(path: Path, names: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Per SME the stored labels as (position, grade), in the order stored."""
    with Database(path, read_only=True, wait=5) as db:
        rows = db.query_all("SELECT annotator, position, grade FROM label_events WHERE sample = 's' AND action = 'label' "
                            "ORDER BY event_id")
    out: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    for annotator, position, grade in rows:
        if annotator in out:
            out[annotator].append((int(position), int(grade)))
    return out


def drained(path: Path, results: list[dict], timeout: float = 240.0) -> dict[str, list[tuple[int, int]]]:
    """The stored labels once every label given is stored (or ``timeout`` seconds have passed:
    what is stored then, for the report to count what is missing)."""
    names = [r["name"] for r in results]
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = stored(path, names)
        except Exception:  # noqa: BLE001 - the file is busy this instant (the read-only open waits 0 s)
            found = None
        if found is not None and all(len(found[r["name"]]) >= len(r["given"]) for r in results):
            return found
        if time.monotonic() > deadline:
            return found or {n: [] for n in names}
        time.sleep(1.0)


def check(results: list[dict], found: dict, positions: dict[int, int]) -> tuple[int, int, int, int, int]:
    """(given, stored, lost, duplicated, wrong grade) over every SME. ``positions`` maps the
    plan's label index to the sample position it labels (pair ``i + 1`` on screen)."""
    given = stored_n = lost = dup = wrong = 0
    for r in results:
        rows = found[r["name"]]
        by_position: dict[int, list[int]] = {}
        for position, grade in rows:
            by_position.setdefault(position, []).append(grade)
        given += len(r["given"])
        stored_n += len(rows)
        dup += sum(len(g) - 1 for g in by_position.values() if len(g) > 1)
        for i, grade in r["given"].items():
            grades = by_position.get(positions[i])
            if not grades:
                lost += 1
            elif grades[0] != grade:
                wrong += 1
    return given, stored_n, lost, dup, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the team phase (default 10)")
    parser.add_argument("--smes", type=int, default=8)
    parser.add_argument("--think", type=float, default=3.0, help="seconds each SME reads a pair (x0.8-1.2)")
    parser.add_argument("--pairs", type=int, default=60_000, help="documents and pool pairs of the project")
    parser.add_argument("--sample", type=int, default=400, help="calibration sample size (pairs each SME may label)")
    parser.add_argument("--solo-seconds", type=float, default=60.0, help="length of the solo phase (the peer)")
    parser.add_argument("--import-every", type=float, default=20.0, help="seconds between two run imports")
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = str(REPO)  # the background job's process imports this checkout
    print(f"start: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "soak.duckdb"
        built = build(path, args.pairs)
        with Database(path) as db:
            cal.create_sample(db, "s", "p", size=args.sample, seed=1, min_per_class=1)
            items = db.query_all("SELECT i.position, q.text FROM calibration_items i JOIN queries q USING (query_id) "
                                 "WHERE i.sample = 's' ORDER BY i.position")
        queries = dict(items)
        total = len(queries)
        first = min(queries)
        positions = {i: first + i for i in range(total)}  # label i is pair i + 1 on screen
        print(f"project: {args.pairs:,} documents and pool pairs built in {built:.1f} s; sample of {total} pairs")
        with serve(REPO, path, {}) as url:
            print(f"solo: 1 SME for {args.solo_seconds:g} s, nothing else running: {load()}")
            solo = asyncio.run(smes(url, ["solo"], args.solo_seconds, args.think, queries, total))
            names = [f"sme{k + 1}" for k in range(args.smes)]
            print(f"team: {args.smes} SMEs for {args.minutes:g} min with a judge job, run imports every "
                  f"{args.import_every:g} s and a background chunking job: {load()}")
            with Database(path, read_only=True, wait=60) as db:
                judged_before = db.query_value("SELECT count(*) FROM judgments WHERE model = 'bench-judge'")
            load_on: dict = {}

            def begin() -> None:  # every SME is on the Label page: the rest of the team starts
                print(f"  all {args.smes} SMEs on their first pair; judge, imports and the chunking job start: "
                      f"{load()}", flush=True)
                load_on["judge"] = stack.enter_context(judge_job(path))
                load_on["importer"] = stack.enter_context(Importer(path, tmp, args.import_every))
                load_on["loads"] = stack.enter_context(Loads())
                load_on["chunk"] = jobs.start(path, jobs.ChunkRequest("soak", "fixed", 300))

            with ExitStack() as stack:
                team = asyncio.run(smes(url, names, args.minutes * 60, args.think, queries, total, on_ready=begin))
                team_seconds = max(r["window"] for r in team)
                judge_still = load_on["judge"]() if "judge" in load_on else None
            importer, loads, chunk_launch = load_on["importer"], load_on["loads"], load_on["chunk"]
            chunk_job = jobs.job(path, chunk_launch.job_id)
            if chunk_job["alive"]:
                jobs.stop(path, chunk_launch.job_id)
            results = solo + team
            found = drained(path, results)
        with Database(path, read_only=True, wait=60) as db:
            judged = db.query_value("SELECT count(*) FROM judgments WHERE model = 'bench-judge'") - judged_before
        print(f"end: {load()}")
    for r in results:
        if r["error"]:
            print(f"  {r['name']} stopped early: {r['error']}")
    given, stored_n, lost, dup, wrong = check(results, found, positions)
    verdict = "OK" if given == stored_n and not lost and not dup and not wrong else "MISMATCH"
    print(f"labels: {given} given, {stored_n} stored, {lost} lost, {dup} duplicated, {wrong} with another grade "
          f"-> {verdict}")
    solo_ms = np.concatenate([np.asarray(r["ms"], dtype=float) for r in solo])
    team_ms = np.concatenate([np.asarray(r["ms"], dtype=float) for r in team]) if team else np.array([])
    print(f"next-pair latency, solo (1 SME alone): {stats(solo_ms)}")
    print(f"next-pair latency, team ({args.smes} SMEs + judge + imports + background job): {stats(team_ms)}")
    if len(solo_ms) and len(team_ms):
        print(f"team / solo: p50 {np.percentile(team_ms, 50) / np.percentile(solo_ms, 50):.1f}x, "
              f"p95 {np.percentile(team_ms, 95) / np.percentile(solo_ms, 95):.1f}x")
    per = [len(r["given"]) for r in team]
    if per:
        print(f"labels per SME in {team_seconds / 60:.1f} min: {', '.join(map(str, per))} "
              f"({3600 * sum(per) / team_seconds:,.0f} labels/hour for the team); pressed again after a "
              f"refusal: {sum(r['again'] for r in team)}")
    print(f"judge job: {judged:,} judgments written during the team phase "
          f"({'still running' if judge_still else 'NOT running'} at its end)")
    imp = importer
    print(f"imports: {imp.imported} runs imported, {imp.locked} attempts found the project locked and were retried, "
          f"{len(imp.failed)} failed" + (f" ({imp.failed[0]})" if imp.failed else "")
          + (f"; seconds per import incl. retries: median {np.median(imp.seconds):.1f}, max {max(imp.seconds):.1f}"
             if imp.seconds else ""))
    print(f"background chunking job {chunk_job['job_id']}: {chunk_job['state']}"
          + (f", {chunk_job['phase']} {chunk_job['done']:,} of {chunk_job['total'] or 0:,} {chunk_job['unit']}"
             if chunk_job["phase"] else "")
          + (f", {chunk_job['result']['chunks']:,} chunks" if chunk_job.get("result") else "")
          + (f"; error: {chunk_job['error']}" if chunk_job.get("error") else ""))
    print(loads.words())


if __name__ == "__main__":
    main()
