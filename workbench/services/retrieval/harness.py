"""Run an external retriever (a command or a local HTTP endpoint) over the project's queries.

Each query is sent on its own and timed (wall clock, milliseconds). The system answers with
ranked results; each result is one of

* ``{"chunk_id": ..., "score": ...}``   a chunk of a stored chunking (all results of a run must
  name chunks of one chunking),
* ``{"doc_id": ..., "start": S, "end": E, "score": ...}``  a character span; mapped onto the
  chunking given by ``chunking=`` (the chunk of that document overlapping the span most; ties
  to the earlier chunk), so span answers become a chunk-level run,
* ``{"doc_id": ..., "score": ...}``   a whole document (a document-level run).

Ranks are assigned by score descending, ties by the system's own order (its first answer
first). A chunk reached twice (two spans in one chunk) keeps its best score.

Transports:

* **command**: ``shlex.split`` of the template, ``{query}`` replaced *inside* argv elements by
  the query text (``{query_id}`` by the id); never a shell, so ``; rm -rf /`` in a query is
  just text. The process's stdout is JSON lines, one result per line.
* **url**: ``POST {"query_id", "query"}`` as JSON to an ``http://127.0.0.1`` / ``localhost``
  URL (other hosts are refused: the harness is for a system under test on this machine); the
  answer is a JSON list of results.

A query that fails (non-zero exit, timeout, HTTP error, output that is not UTF-8 or not JSON, a
score no float holds, a result without an id or score, unknown chunk) is recorded as failed with
its error text in the run's ``params`` (``failures: [{query_id, error, latency_ms}]``) and has no
rows; it is never an empty result in disguise. A run where every query failed is not stored (an
error lists the first failures).

:func:`run_harness` does it all on one open project (the CLI). A page calls
:func:`plan_harness` (checks and reads), :func:`collect_answers` (sends the queries; no database)
and :func:`store_harness` (writes) with the project open only for the first and last, so a slow
system does not hold the project file while its queries are out.

Latency is stored like our own retrievers' (:func:`workbench.services.retrieval.runs.latency_params`,
table ``run_latencies``): one value per *answered* query, the wall clock from sending the query
to having its answer parsed (process start and exit included for a command). A failed query's
time to fail is kept with its failure, not among the latencies: a timeout would otherwise pass
for a slow answer, and a quick refusal for a fast one.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from workbench.core.formats.lines import load_json_line, split_lines
from workbench.core.formats.names import check_name
from workbench.errors import InputError, StoreError
from workbench.services import access
from workbench.services.progress import ProgressFactory, no_progress
from workbench.services.retrieval.runs import latency_params
from workbench.services.tags import query_tags
from workbench.store.chunks import chunking_exists, read_chunks, stored_chunks
from workbench.store.corpus import read_queries
from workbench.store.database import Database
from workbench.store.latencies import write_latencies
from workbench.store.runs import run_exists, set_run_scope, write_run

DEFAULT_TIMEOUT = 30.0
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class QueryFailed(Exception):
    """One query's failure; the message is what the run records."""


@dataclass(frozen=True)
class HarnessSummary:
    name: str
    level: str
    chunking: str | None
    queries: int
    answered: int
    failed: list[dict]
    rows: int
    latency_ms_p50: float
    latency_ms_p95: float
    params: dict = field(default_factory=dict)


# --- transports ---------------------------------------------------------------------------------
def command_argv(template: str, query_id: str, query: str) -> list[str]:
    """argv of ``template`` for one query: placeholders replaced inside elements, no shell."""
    try:
        parts = shlex.split(template)
    except ValueError as exc:
        raise InputError(f"{{field}} {template!r} cannot be split into arguments ({exc})", field="command",
                         hint="check its quotes") from None
    if not parts:
        raise InputError("{field} is empty", field="command",
                         hint="give a program and its arguments, like {field} 'mysearch {query}'")
    return [p.replace("{query_id}", query_id).replace("{query}", query) for p in parts]


def _decoded(data: bytes, what: str) -> str:
    """``data`` as UTF-8, or :class:`QueryFailed` naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise QueryFailed(f"{what} is not UTF-8: byte 0x{data[exc.start]:02x} on line {line} "
                          f"(byte {exc.start}); the system must write UTF-8 JSON") from None


def _json(text: str, what: str):
    """``json.loads(text)``; whatever makes it fail (broken JSON, nesting too deep, an integer
    of more digits than Python converts, a lone surrogate) is :class:`QueryFailed` naming
    ``what``."""
    try:
        return load_json_line(text, what, None, invalid="not JSON ({msg} at column {column})")
    except InputError as exc:
        raise QueryFailed(str(exc)) from None


def run_command(template: str, query_id: str, query: str, timeout: float) -> list[dict]:
    argv = command_argv(template, query_id, query)
    try:
        # bytes, decoded below: text=True would raise UnicodeDecodeError on output that is not UTF-8
        done = subprocess.run(argv, check=False, capture_output=True, timeout=timeout, shell=False)
    except subprocess.TimeoutExpired:
        raise QueryFailed(f"timed out after {timeout:g} s") from None
    except OSError as exc:
        raise QueryFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or ["no stderr"]
        raise QueryFailed(f"exit code {done.returncode}: {tail[0][:300]}")
    results = []
    # split at \n only: a JSON string may hold U+2028 and friends, which str.splitlines splits at
    for number, line in enumerate(split_lines(_decoded(done.stdout, "stdout")), 1):
        if not line.strip():
            continue
        results.append(_json(line, f"stdout line {number}"))
    return results


def check_url(url: str) -> str:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or parsed.hostname not in LOCAL_HOSTS:
        raise InputError(f"{{field}} {url!r} must be http://127.0.0.1:PORT/... (or localhost): the harness only "
                         f"calls a system running on this machine", field="url")
    return url


def run_url(url: str, query_id: str, query: str, timeout: float) -> list[dict]:
    body = json.dumps({"query_id": query_id, "query": query}).encode()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise QueryFailed(f"HTTP {exc.code}: {exc.read()[:200].decode('utf-8', 'replace')}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise QueryFailed(f"request failed: {reason}") from None
    results = _json(_decoded(payload, "the answer").lstrip("\ufeff"), "the answer")
    if not isinstance(results, list):
        raise QueryFailed(f"answer must be a JSON list of results, got {type(results).__name__}")
    return results


# --- results ------------------------------------------------------------------------------------
def _result_kind(result) -> str:
    if not isinstance(result, dict):
        raise QueryFailed(f"a result must be a JSON object, got {result!r:.80}")
    score = result.get("score")
    if isinstance(score, int) and not isinstance(score, bool):
        try:
            score = float(score)
        except OverflowError:  # an integer beyond a float's range: not a finite score
            score = math.inf
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise QueryFailed(f"result {result!r:.120} has no finite numeric 'score'")
    if "chunk_id" in result:
        return "chunk"
    if "doc_id" in result and ("start" in result or "end" in result):
        start, end = result.get("start"), result.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
            raise QueryFailed(f"span result {result!r:.120} needs integer 0 <= start < end")
        return "span"
    if "doc_id" in result:
        return "doc"
    raise QueryFailed(f"result {result!r:.120} names no 'chunk_id' or 'doc_id'")


def _span_to_chunk(chunks: pd.DataFrame, doc_id: str, start: int, end: int) -> tuple[str, str]:
    """The chunk of ``doc_id`` overlapping [start, end) most (earliest on ties)."""
    mine = chunks.loc[chunks["doc_id"] == doc_id]
    overlap = (mine["end"].clip(upper=end) - mine["start"].clip(lower=start)).clip(lower=0)
    if mine.empty or overlap.max() <= 0:
        raise QueryFailed(f"span {doc_id}[{start}:{end}] overlaps no chunk of the chunking")
    return str(mine.loc[overlap.idxmax(), "chunk_id"]), doc_id


def select_queries(db: Database, spec) -> pd.DataFrame:
    """``all`` every project query; ``tag:VALUE`` the queries tagged VALUE; a list or tuple of
    query ids (the app's choice); else a file of query ids (one per line, ``#`` comments). Ids
    must all be project queries."""
    queries = read_queries(db)
    if queries.empty:
        raise InputError(f"{db.path} holds no queries; import them first ({{command:import queries FILE}})")
    if isinstance(spec, (list, tuple)):
        return _pick_ids(queries, [str(q) for q in spec], "the chosen queries")
    if spec == "all":
        return queries
    if spec.startswith("tag:"):
        tag = spec[4:]

        def has(tags) -> bool:
            if tags is None or (isinstance(tags, float) and math.isnan(tags)):
                return False
            if isinstance(tags, str):
                try:
                    tags = json.loads(tags)
                except json.JSONDecodeError:
                    return tag == tags
            if isinstance(tags, dict):
                return tag in {str(v) for v in tags.values()} or tag in tags
            return tag in {str(t) for t in tags}

        picked = queries.loc[queries["tags"].map(has)]
        if picked.empty:
            raise InputError(f"{{field}} {spec}: no query carries the tag {tag!r}", field="queries")
        return picked

    path = Path(spec)
    if not path.is_file():
        raise InputError(f"{{field}} {spec!r}: not 'all', 'tag:VALUE' or an existing file of query ids",
                         field="queries")
    ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
           if line.strip() and not line.lstrip().startswith("#")]
    return _pick_ids(queries, ids, str(path))


def query_choices(db: Database) -> tuple[list[str], dict[str, list[str]]]:
    """What a page offers to send: every query id (project order) and, per query tag (as
    :func:`workbench.services.tags.query_tags` reads them, ``key=value`` for mappings), the ids
    carrying it. The page passes the chosen ids to :func:`run_harness` as a list."""

    ids = read_queries(db)["query_id"].astype(str).tolist()
    tags = query_tags(db)
    by_tag = {tag: group["query_id"].tolist() for tag, group in tags.groupby("tag", sort=True)} if len(tags) else {}
    return ids, by_tag


def _pick_ids(queries: pd.DataFrame, ids: list[str], where: str) -> pd.DataFrame:
    unknown = sorted(set(ids) - set(queries["query_id"]))
    if unknown:
        raise InputError(f"{where}: query ids not in the project: {unknown[:5]}; import them first")
    if not ids:
        raise InputError(f"{where} lists no query ids")
    return queries.set_index("query_id").loc[list(dict.fromkeys(ids))].reset_index()


@dataclass(frozen=True)
class HarnessPlan:
    """What a harness run will do, checked against the project: the queries picked (``query_id,
    text``) and, for span answers, the chunks of ``chunking``. Holds no database handle, so the
    queries can be sent with the project closed (:func:`collect_answers`)."""

    name: str
    queries: str | list[str]
    command: str | None
    url: str | None
    timeout: float
    chunking: str | None
    picked: pd.DataFrame
    span_chunks: pd.DataFrame | None

    def call(self, query_id: str, text: str) -> list[dict]:
        if self.command is not None:
            return run_command(self.command, query_id, text, self.timeout)
        return run_url(self.url, query_id, text, self.timeout)


@dataclass
class Collected:
    """The system's answers: ``answers`` per answered query, ``failures`` (``query_id, error,
    latency_ms``), ``latency`` ``(query_id, ms)`` of the answered queries, result ``kinds``."""

    answers: dict[str, list[dict]] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)
    latency: list[tuple[str, float]] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)


def plan_harness(db: Database, name: str, *, queries: str | list[str] = "all", command: str | None = None,
                 url: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 chunking: str | None = None) -> HarnessPlan:
    """Check the options against the project and read what the run needs; sends nothing."""
    access.require("build")
    if (command is None) == (url is None):
        raise InputError("give exactly one of {field:command} 'PROGRAM ... {query}' or {field:url} http://127.0.0.1:PORT/PATH")
    if not (timeout > 0):
        raise InputError(f"{{field}} must be a positive number of seconds, got {timeout!r}", field="timeout")
    check_name(name, "run", "choose another {field}", field="name")
    if run_exists(db, name):
        raise StoreError(f"run {name!r} already exists in {db.path}", field="name", hint="choose another {field}")
    if command is not None:
        command_argv(command, "q", "q")  # template errors before any query runs
    else:
        check_url(url)
    span_chunks = None
    if chunking is not None:
        if not chunking_exists(db, chunking):
            raise StoreError(f"no chunking {chunking!r} in {db.path}; create it first ({{command:chunk ...}})")
        span_chunks = read_chunks(db, chunking)
    picked = select_queries(db, queries)
    return HarnessPlan(name, queries, command, url, float(timeout), chunking, picked, span_chunks)


def collect_answers(plan: HarnessPlan, progress: ProgressFactory = no_progress) -> Collected:
    """Send each picked query to the system, one at a time, timing each (module docstring)."""
    got = Collected()
    with progress(f"harness {plan.name}", len(plan.picked), "query") as advance:
        for qid, text in zip(plan.picked["query_id"].astype(str), plan.picked["text"].astype(str)):
            started = time.perf_counter()
            try:
                results = plan.call(qid, text)
                for r in results:
                    got.kinds.add(_result_kind(r))
                got.answers[qid] = results
            except QueryFailed as exc:
                got.failures.append({"query_id": qid, "error": str(exc),
                                     "latency_ms": (time.perf_counter() - started) * 1000.0})
            else:
                got.latency.append((qid, (time.perf_counter() - started) * 1000.0))
            advance(1)
    return got


def run_harness(db: Database, name: str, *, queries: str | list[str] = "all", command: str | None = None,
                url: str | None = None, timeout: float = DEFAULT_TIMEOUT, chunking: str | None = None,
                progress: ProgressFactory = no_progress) -> HarnessSummary:
    """Send every selected query to the system, store its answers as run ``name``
    (:func:`plan_harness`, :func:`collect_answers` and :func:`store_harness` on one project)."""
    plan = plan_harness(db, name, queries=queries, command=command, url=url, timeout=timeout, chunking=chunking)
    return store_harness(db, plan, collect_answers(plan, progress))


def store_harness(db: Database, plan: HarnessPlan, got: Collected) -> HarnessSummary:
    """Place the answers (chunks, spans or documents) and store the run, its failures and the
    answered queries' latencies in one transaction. Refuses, storing nothing, when every query
    failed, the kinds of results are mixed, or spans came without a chunking."""
    access.require("build")
    name, command, url, queries, timeout, picked = (plan.name, plan.command, plan.url, plan.queries,
                                                    plan.timeout, plan.picked)
    if run_exists(db, name):  # made by someone else while the queries were out
        raise StoreError(f"run {name!r} already exists in {db.path}", field="name", hint="choose another {field}")
    answers, kinds = got.answers, got.kinds
    failures = [dict(f) for f in got.failures]
    latency = list(got.latency)
    if not answers:
        listing = "; ".join(f"{f['query_id']}: {f['error']}" for f in failures[:3])
        raise InputError(f"every query failed ({len(failures)}), nothing stored; first: {listing}")
    if len(kinds - {"span"}) > 1 or ("span" in kinds and "doc" in kinds):
        raise InputError(f"the system answered with mixed result kinds {sorted(kinds)}; a run ranks chunks "
                         f"(chunk_id or spans) or documents (doc_id), not both")
    if "span" in kinds and plan.span_chunks is None:
        raise InputError("the system answered with spans (doc_id, start, end); {set_field:chunking NAME} to map them "
                         "onto chunks")
    rows, level, run_chunking = _rows(db, answers, failures, kinds, plan.span_chunks, plan.chunking)
    failed_ids = {f["query_id"] for f in failures}
    # Answers that could not be placed (unknown chunk, ...) moved to failures in _rows: their
    # time goes with the failure too.
    timed = dict(latency)
    for failure in failures:
        failure.setdefault("latency_ms", timed.get(failure["query_id"]))
    ok_latency = pd.DataFrame([(q, ms) for q, ms in latency if q not in failed_ids],
                              columns=["query_id", "latency_ms"])
    params = {"retriever": "harness", "transport": "command" if command else "url",
              "command": command, "url": url,
              "queries": queries if isinstance(queries, str) else list(picked["query_id"].astype(str)),
              "timeout_s": timeout, "failures": failures, "failed_queries": len(failures), "chunking": run_chunking,
              **latency_params(ok_latency["latency_ms"], "per answered query, ms: wall clock from sending the "
                                                         "query to its parsed answer (table run_latencies)")}
    with db.transaction() as tx:
        n = write_run(tx, name, "harness", rows, params=params)
        set_run_scope(tx, name, level, run_chunking)
        write_latencies(tx, name, ok_latency)
    return HarnessSummary(name, level, run_chunking, len(picked), len(picked) - len(failures), failures, n,
                          params.get("latency_p50_ms", float("nan")), params.get("latency_p95_ms", float("nan")),
                          params)


def _rows(db, answers, failures, kinds, span_chunks, chunking):
    """Flat ranked rows; queries whose results cannot be placed move to ``failures``."""
    level = "doc" if kinds == {"doc"} else "chunk"
    known = None
    if "chunk" in kinds:
        ids = sorted({str(r["chunk_id"]) for rs in answers.values() for r in rs})
        with db.cursor() as cur:
            known = stored_chunks(cur, ids)
        chunkings = sorted(set(known["chunking"]))
        if len(chunkings) > 1:
            raise InputError(f"the answers name chunks of several chunkings {chunkings}; a run ranks one chunking")
        if chunking is not None and chunkings and chunkings != [chunking]:
            raise InputError(f"the answers name chunks of {chunkings[0]!r}, not of {{field}} {chunking!r}",
                             field="chunking")
        chunking = chunkings[0] if chunkings else chunking
        known = known.set_index("chunk_id")["doc_id"]
    frames = []
    for qid, results in answers.items():
        try:
            items: dict[str, tuple[str | None, float, int]] = {}
            for order, r in enumerate(results):
                score = float(r["score"])
                if "chunk_id" in r:
                    cid = str(r["chunk_id"])
                    if cid not in known.index:
                        raise QueryFailed(f"unknown chunk_id {cid!r} (not in the project's chunkings)")
                    key, doc = cid, str(known[cid])
                elif "start" in r:
                    key, doc = _span_to_chunk(span_chunks, str(r["doc_id"]), r["start"], r["end"])
                else:
                    key, doc = str(r["doc_id"]), str(r["doc_id"])
                if key not in items or score > items[key][1]:
                    first = items[key][2] if key in items else order
                    items[key] = (doc, score, first)
        except QueryFailed as exc:
            failures.append({"query_id": qid, "error": str(exc)})
            continue
        ranked = sorted(items.items(), key=lambda kv: (-kv[1][1], kv[1][2]))
        frames.append(pd.DataFrame({
            "query_id": qid,
            "doc_id": [d for _, (d, _, _) in ranked],
            "chunk_id": [k if level == "chunk" else None for k, _ in ranked],
            "rank": range(1, len(ranked) + 1),
            "score": [s for _, (_, s, _) in ranked],
        }))
    if not frames:
        raise InputError(f"no query's answers could be stored; first failure: {failures[0]}")
    rows = pd.concat(frames, ignore_index=True)
    return rows, level, (chunking if level == "chunk" else None)
