"""What the Qrels and Evaluate pages show, computed here so the views hold no SQL and no metric
loop.

* :func:`qrels_overview` - the merge policy statement, counts per grade and per source tier,
  and coverage of each pool (share of its pairs labelled, by whom).
* :func:`qrels_download` - the bytes of a qrels export in any format, written by the same
  service as ``workbench export qrels`` (:func:`workbench.services.qrels.export.export_qrels`).
* :func:`evaluate_runs` - stored runs scored against the project's qrels (one rule:
  :func:`workbench.services.qrels.rule.project_qrels`), each run at its own level and chunking.
* :func:`means_with_ci` - per measure the mean and a 95 % percentile bootstrap interval of the
  mean over queries (queries resampled with replacement, ``seed`` given and shown).
* :func:`worst_queries` / :func:`top_results` - the per-query drill-down, worst first, and a
  run's top ``k`` for one query with each item's grade (``None`` = unjudged).
* :func:`per_query_difference` - one run against a baseline query by query, sorted by the
  difference (worst for the run first), both runs' top results with their grades side by side.
* :func:`judged_shares` - judged@k per run: the share of each run's top ``k`` that carries a
  label (divided by ``k`` as trec_eval does), mean over the queries the run answered; by
  document, a chunk run's top ``k`` are its first ``k`` distinct documents (:func:`top_items`).
* :func:`slices` - per query tag, the mean of a measure over the queries carrying the tag.
* :func:`latencies` / :func:`pareto_frontier` - quality against p95 latency when runs have
  stored per-query latencies (or record a ``latency_ms`` parameter); the frontier is the runs no other run beats on
  both (higher quality and lower latency).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.core.metrics.comparison import compare_runs
from workbench.core.metrics.distribution import summarize
from workbench.core.metrics.significance import bootstrap_ci
from workbench.core.metrics.stages import stage_lift as lift
from workbench.core.metrics.stages import stage_report as report
from workbench.core.pooling.diagnostics import judged_at_k
from workbench.errors import InputError, WorkbenchError
from workbench.services import visibility
from workbench.services.evaluation.evaluate import evaluate_project
from workbench.services.evaluation.evaluate import stored_evaluations as stored
from workbench.services.evaluation.per_query_diff import stored_per_query_diff
from workbench.services.evaluation.rank_agreement import rank_agreement as agreement
from workbench.services.pooling.pools import add_runs, list_pools, pool_pairs
from workbench.services.qrels import summary
from workbench.services.qrels.answerability import without_unanswerable
from workbench.services.qrels.export import export_qrels
from workbench.services.qrels.rule import default_policy, project_qrels
from workbench.services.retrieval.latency import latency_summary
from workbench.services.tags import query_tags
from workbench.store.corpus import query_texts
from workbench.store.database import Database
from workbench.store.pools import count_pool_pairs_among, count_pool_pairs_judged, read_pool_pair_counts
from workbench.store.runs import read_run_info, read_run_rows
from workbench.store.synthetic_queries import synthetic_query_ids

CONFIDENCE = 0.95


# ---------------------------------------------------------------------------------------- qrels

@dataclass(frozen=True)
class QrelsOverview:
    statement: str
    notes: tuple[str, ...]
    rows: int
    queries: int
    by_grade: dict
    by_tier: dict
    coverage: pd.DataFrame  # pool, pairs, labelled, share, by_human, by_llm
    fingerprint_of: object = field(default="", repr=False, compare=False)  # str, or a call that makes it

    @property
    def fingerprint(self) -> str:
        """The qrels' fingerprint (:attr:`ProjectQrels.fingerprint`), made when read."""
        return self.fingerprint_of() if callable(self.fingerprint_of) else str(self.fingerprint_of)


def _project_qrels(db: Database, level: str = "doc", chunking: str | None = None, source: str = "merged"):

    return project_qrels(db, level=level, chunking=chunking, source=source)


def qrels_overview(db: Database, *, level: str = "doc", chunking: str | None = None,
                   source: str = "merged") -> QrelsOverview:
    """Policy, counts and pool coverage of the project's qrels (module docstring); an annotator's
    are computed from their own and the imported labels (:mod:`workbench.services.visibility`)."""
    if source == "llm":
        visibility.require_read("judge_output")


    # the qrels evaluation scores against and the export writes: without unanswerable queries
    made: dict = {}  # (level, chunking, source) -> the rule's qrels, each built once per call

    def qrels_of(lvl: str, chk: str | None, src: str):
        if (lvl, chk, src) not in made:
            made[(lvl, chk, src)] = _project_qrels(db, lvl, chk, src)
        return made[(lvl, chk, src)]

    # document level: counted in SQL (services.qrels.summary), not built in pandas, where it can be
    pools = read_pool_pair_counts(db)
    doc_pools = [str(n) for n, lvl in zip(pools["name"], pools["level"]) if lvl != "chunk"]
    fast = summary.doc_summary(db, source=source, pools=doc_pools) if level == "doc" else None
    admitted: dict = {}
    if fast is not None:
        statement, notes, fingerprint = fast.statement, fast.notes, fast.fingerprint
        counts = {"rows": fast.rows, "queries": fast.queries, "by_grade": fast.by_grade, "by_tier": fast.by_tier}
        # the admissions a document pool's coverage counts pairs under (by people, any label)
        if source != "merged":
            admitted = {src: summary.admission(db, src, None) for src in ("human", "merged")}
    else:
        merged, left_out = without_unanswerable(db, qrels_of(level, chunking if level == "chunk" else None, source))
        notes = tuple(merged.notes) + ((f"{len(left_out):,} unanswerable queries left out ({', '.join(left_out[:5])}"
                                        f"{', ...' if len(left_out) > 5 else ''}): nothing in the corpus answers "
                                        f"them, so they have no ranking score",) if left_out else ())
        counts = merged.counts()
        statement, fingerprint = merged.statement(), partial(getattr, merged, "fingerprint")  # made when read
    rows = []
    for name, pool_level, pool_chunking, n_pairs in pools[["name", "level", "chunking", "pairs"]].itertuples(
            index=False):
        doc_pool = pool_level != "chunk"
        # a document pool's pairs are counted in SQL (a semi join with the qrels' keys), not read
        pairs = None if doc_pool else pool_pairs(db, str(name))
        n_pairs = int(n_pairs) if doc_pool else len(pairs)
        if not n_pairs:
            rows.append({"pool": name, "pairs": 0, "labelled": 0, "share": 0.0, "by_people": 0, "by_llm": 0})
            continue
        keys = None if doc_pool else pd.MultiIndex.from_frame(pairs[["query_id", "chunk_id"]].astype(str))
        chunking_name = None if pd.isna(pool_chunking) or doc_pool else str(pool_chunking)
        by = {}
        for who, src in (("people", "human"), ("llm", "llm"), ("any", "merged")):
            if who == "llm" and doc_pool and not visibility.limited():
                # counted with the qrels where they admit every LLM label, else on its own (in SQL either way)
                by[who] = (fast.judged[str(name)] if fast is not None and fast.judged is not None
                           else _doc_pool_pairs_the_judge_graded(db, str(name)))
                continue
            if doc_pool and fast is not None and source == "merged" and who != "llm":  # counted with the qrels
                by[who] = fast.pools[str(name)][0 if who == "any" else 1]
                continue
            if doc_pool and admitted.get(src) is not None:
                by[who] = summary.doc_pool_labelled(db, str(name), admitted[src])
                continue
            q = qrels_of(str(pool_level), chunking_name, src).table
            if doc_pool:
                found = q[["query_id", "item_id"]].astype(str).rename(columns={"item_id": "item"})
                by[who] = count_pool_pairs_among(db, str(name), "doc", found)
            else:
                by[who] = int(keys.isin(pd.MultiIndex.from_frame(q[["query_id", "item_id"]].astype(str))).sum())
        rows.append({"pool": name, "pairs": n_pairs, "labelled": by["any"],
                     "share": by["any"] / n_pairs, "by_people": by["people"], "by_llm": by["llm"]})
    return QrelsOverview(statement, notes, counts["rows"], counts["queries"],
                         counts["by_grade"], counts["by_tier"], pd.DataFrame(rows), fingerprint)


def _doc_pool_pairs_the_judge_graded(db: Database, pool: str) -> int:
    """Pairs of a document pool that the ``llm`` source's document qrels hold, counted in SQL:
    those qrels have a row for every (query, document) with an ok graded LLM label (max grade
    over spans, every configuration: asking for the judge's labels is the opt-in), none when
    the policy takes no LLM labels, and synthetic queries kept or left out by the policy."""

    pol = default_policy().for_source("llm")
    if pol.llm_labels == "none":
        return 0
    synthetic = sorted(synthetic_query_ids(db)) if pol.synthetic != "include" else []
    if pol.synthetic == "only":
        return count_pool_pairs_judged(db, pool, "llm", only_queries=synthetic)
    return count_pool_pairs_judged(db, pool, "llm", without_queries=synthetic)


def qrels_download(db: Database, *, format: str, level: str = "doc", chunking: str | None = None,
                   source: str = "merged") -> tuple[bytes, str]:
    """The export file's bytes and its summary line, written by ``export_qrels`` into a private
    temporary folder (the same code path as ``workbench export qrels``). Refused to annotators."""

    visibility.require_read("label_files")

    with tempfile.TemporaryDirectory(prefix="workbench-qrels-") as folder:
        out = Path(folder) / f"qrels.{format}"
        result = export_qrels(db, out, format=format, level=level, chunking=chunking, source=source)
        return out.read_bytes(), result.summary().replace(str(out), "the download")


# ----------------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class RunEvaluation:
    """Stored runs scored against the project's qrels."""

    results: dict  # run name -> core.evaluation.EvaluationResult
    statements: dict  # run name -> qrels policy statement it was scored under
    qrels: dict  # run name -> qrels table (query_id, item_id, grade)
    levels: dict  # run name -> (level, chunking)
    notes: tuple = ()
    evaluation_id: int | None = None


def run_table(db: Database) -> pd.DataFrame:
    """The project's runs: ``name, retriever, stage, level, chunking, params, rows, queries``."""

    return read_run_info(db)


def evaluate_runs(db: Database, runs: list[str], measures: list[str], *, source: str = "merged",
                  level: str | None = None, rel: int = 1, store: bool = False) -> RunEvaluation:
    """Score stored runs against the project's qrels through the one evaluation service
    (:func:`workbench.services.evaluation.evaluate.evaluate_project`), stored only when ``store``.

    ``level`` (``doc`` or ``chunk``) is the level asked for, refused as ``workbench eval
    --level`` refuses it (chunk level needs chunk runs of one chunking; the error names the
    ``level`` field). None picks one: runs of one level are scored at it (chunk runs of one
    chunking by chunk); runs mixing documents and chunks, or chunkings, are scored by document
    (a chunk run's document takes its best chunk's score), so that they can be compared at all.
    """

    if not runs:
        raise InputError("choose at least one run")
    if not measures:
        raise InputError("choose at least one measure")
    if source == "llm":
        visibility.require_read("judge_output")
    info = run_table(db).set_index("name")
    unknown = [r for r in runs if r not in info.index]
    if unknown:
        raise InputError(f"no run named {unknown[0]!r} in the project")
    mixed = len(run_scopes(db, runs)) > 1
    if level is None and mixed:
        level = "doc"
    done = evaluate_project(db, list(runs), list(measures), labels=source, level=level, rel=rel, store=store)
    statement = done.qrels.statement()
    if mixed:
        statement += "; the runs mix documents and chunks (or chunkings), so every run is scored by document"
    table = done.qrels.table[["query_id", "item_id", "grade"]]
    scope = (done.qrels.level, done.qrels.chunking)
    return RunEvaluation(done.results, {n: statement for n in done.results}, {n: table for n in done.results},
                         {n: scope for n in done.results}, tuple(done.notes), done.evaluation_id)


def run_scopes(db: Database, runs: list[str]) -> set[tuple[str, str | None]]:
    """The distinct ``(level, chunking)`` of stored ``runs`` (chunking None for document runs);
    more than one means they can be compared by document only. Unknown names are left out."""
    info = run_table(db).set_index("name")
    return {(str(info.at[r, "level"]), None if pd.isna(info.at[r, "chunking"]) else str(info.at[r, "chunking"]))
            for r in runs if r in info.index}


def stored_evaluations(db: Database) -> pd.DataFrame:
    """The history of stored evaluations, newest first: ``when, runs, measures, labels, level,
    qrels`` (fingerprint) and ``means`` as ``run measure=value`` text. Refused to annotators (they
    were scored with everyone's labels)."""

    visibility.require_read("others_labels")

    table = stored(db)
    if table.empty:
        return pd.DataFrame()
    def text(value):
        return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    rows = []
    for row in table.to_dict("records"):
        means = "; ".join(f"{run} " + ", ".join(f"{m}={v:.3f}" for m, v in ms.items())
                          for run, ms in row.get("means", {}).items())
        rows.append({"when": row.get("created_at"), "runs": text(row.get("runs", "")),
                     "measures": text(row.get("measures", "")), "labels": row.get("labels"),
                     "level": row.get("level"), "qrels": row.get("qrels_fingerprint"), "means": means})
    return pd.DataFrame(rows)


def rank_agreement(db: Database, runs: list[str], measures: list[str], *,
                   level: str | None = None) -> tuple[pd.DataFrame, str | None]:
    """Per measure, Kendall's τ and τ_AP between the ranking of ``runs`` under the people's
    qrels and under the judge's at ``level`` (None: as :func:`evaluate_runs` picks it)
    (:func:`workbench.services.evaluation.rank_agreement.rank_agreement`);
    ``(empty, reason)`` when the project lacks one of the two label kinds, or for an annotator."""

    if not visibility.can_read("judge_output"):
        return pd.DataFrame(), "the ranking by the judge's labels is shown to leads and viewers only"

    if level is None and len(run_scopes(db, runs)) > 1:
        level = "doc"
    rows = []
    for measure in measures:
        try:
            out = agreement(db, list(runs), measure, level=level)
        except WorkbenchError as exc:
            return pd.DataFrame(), str(exc)
        rows.append({"measure": measure, "runs": out["n_runs"], "tau": out["tau"], "tau_ap": out["tau_ap"],
                     "ranking_human": out["ranking_human"], "ranking_judge": out["ranking_judge"],
                     "reason": out.get("reason")})
    return pd.DataFrame(rows), None


def means_with_ci(evaluation: RunEvaluation, *, seed: int = 0, n_resamples: int = 2000) -> pd.DataFrame:
    """``run, measure, mean, ci_low, ci_high, queries, zero_share`` (95 % bootstrap interval of
    the mean: :func:`workbench.core.metrics.significance.bootstrap_ci` of the scores against zeros)."""

    rows = []
    for name, result in evaluation.results.items():
        for label, values in result.scores.items():
            v = values[~np.isnan(values)]
            if not v.size:
                continue
            ci = bootstrap_ci(np.zeros_like(v), v, confidence=CONFIDENCE, n_resamples=n_resamples, seed=seed)
            rows.append({"run": name, "measure": label, "mean": float(v.mean()), "ci_low": ci.low,
                         "ci_high": ci.high, "queries": int(v.size), "zero_share": summarize(v).share_zero})
    return pd.DataFrame(rows)


def per_query(evaluation: RunEvaluation, measure: str) -> pd.DataFrame:
    """``run, query_id, value`` of one measure (NaN left out)."""
    frames = []
    for name, result in evaluation.results.items():
        if measure in result.scores:
            frame = pd.DataFrame({"run": name, "query_id": result.query_ids.astype(str),
                                  "value": result.scores[measure]})
            frames.append(frame.dropna())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "query_id", "value"])


def worst_queries(db: Database, evaluation: RunEvaluation, run: str, measure: str,
                  limit: int | None = 20) -> pd.DataFrame:
    """``query_id, query, value`` of ``run`` sorted worst first (ties by query id); every
    query when ``limit`` is None."""

    values = per_query(evaluation, measure)
    values = values[values["run"] == run].sort_values(["value", "query_id"], kind="stable")
    if limit is not None:
        values = values.head(limit)
    texts = query_texts(db).set_index("query_id")["text"]
    values["query"] = values["query_id"].map(texts).fillna("")
    return values[["query_id", "query", "value"]].reset_index(drop=True)


def top_results(db: Database, evaluation: RunEvaluation, run: str, query_id: str, k: int = 10) -> pd.DataFrame:
    """``rank, item_id, score, grade`` of ``run``'s top ``k`` for ``query_id`` at the level it
    was scored at (by document, a chunk run's document once, at its best chunk:
    :func:`top_items`); grade is NA when the pair is unjudged."""
    level, _ = evaluation.levels[run]
    rows = top_items(db, run, level, k, query_id=str(query_id))  # the query's top k, read alone
    items = rows["chunk_id"].where(rows["chunk_id"].notna(), rows["doc_id"]) if level == "chunk" else rows["doc_id"]
    q = evaluation.qrels[run]
    grades = q[q["query_id"].astype(str) == str(query_id)].set_index("item_id")["grade"]
    out = pd.DataFrame({"rank": rows["rank"].astype(int).to_numpy(), "item_id": items.astype(str).to_numpy(),
                        "doc_id": rows["doc_id"].astype(str).to_numpy(),
                        "score": rows["score"].astype(float).to_numpy()})
    out["grade"] = out["item_id"].map(grades).astype("Int64")
    return out


def per_query_difference(db: Database, evaluation: RunEvaluation, baseline: str, run: str, measure: str,
                         k: int = 5) -> pd.DataFrame:
    """``query_id, query, baseline_value, run_value, delta, baseline_top, run_top`` of ``run``
    against ``baseline`` on ``measure``: ``delta = run − baseline``, sorted by delta ascending
    (where the run loses most first), ties by query id; each top is the run's top ``k`` as a
    list of ``(item_id, grade)``, grade None when unjudged. The same computation as
    ``workbench compare --runs --per-query``
    (:func:`workbench.services.evaluation.per_query_diff.stored_per_query_diff`), on the
    qrels the runs were scored with. Queries the measure excludes (no relevant item) are left
    out."""

    if baseline == run:
        raise InputError("choose two different runs: the baseline and the run to compare with it")
    unknown = [r for r in (baseline, run) if r not in evaluation.results]
    if unknown:
        raise InputError(f"run {unknown[0]!r} is not among the runs evaluated here")
    results = {name: evaluation.results[name] for name in (baseline, run)}
    level, _ = evaluation.levels[baseline]
    diffs = stored_per_query_diff(db, results, evaluation.qrels[baseline], level, [measure], k=k)
    columns = ["query_id", "query", "baseline_value", "run_value", "delta", "baseline_top", "run_top"]
    if not diffs:
        return pd.DataFrame(columns=columns)
    texts = query_texts(db).set_index("query_id")["text"]
    frame = pd.DataFrame([{"query_id": d.query_id, "baseline_value": d.baseline_value, "run_value": d.run_value,
                           "delta": d.delta, "baseline_top": list(d.baseline_top), "run_top": list(d.run_top)}
                          for d in diffs])
    frame["query"] = frame["query_id"].map(texts).fillna("")
    return frame[columns]


def top_items(db: Database, run: str, level: str, k: int, *, query_id: str | None = None) -> pd.DataFrame:
    """``query_id, doc_id, chunk_id, rank, score`` of ``run``'s top ``k`` items per query (of
    ``query_id`` alone when given), by query then rank. At ``chunk`` level the items are the
    rows. At ``doc`` level a chunk run's document is counted once, at its first row (its best
    rank, so its best chunk), and the top ``k`` are the first ``k`` distinct documents: a run
    listing a document's chunks at ranks 1, 2 and 5 has that document at rank 1 and the next
    document at rank 2 (``rank`` is the document's rank, ``chunk_id`` its best chunk). Reading stops at the depth where every query has ``k`` documents or no
    more rows (the depth doubles from ``k``), so a deep run is not read whole."""

    k = int(k)
    if level == "chunk":
        return read_run_rows(db, run, query_id=query_id, depth=k)
    depth, read = k, -1
    while True:
        rows = read_run_rows(db, run, query_id=query_id, depth=depth)
        docs = rows.drop_duplicates(["query_id", "doc_id"], keep="first")  # rows come by rank
        if len(rows) == read:  # the run has no deeper rows
            break
        read = len(rows)
        per_query = docs.groupby("query_id", sort=False).size()
        deepest = rows.groupby("query_id", sort=False)["rank"].max()
        short = (per_query < k) & (deepest.reindex(per_query.index) >= depth)
        if not short.any():
            break
        depth *= 2
    top = docs.groupby("query_id", sort=False).head(k).reset_index(drop=True)
    return top.assign(rank=top.groupby("query_id", sort=False).cumcount() + 1)  # the document's own rank


def judged_shares(db: Database, evaluation: RunEvaluation, k: int = 10) -> pd.DataFrame:
    """``run, judged_at_k`` (module docstring), at the level the runs were scored at: by
    document, each document of a chunk run counts once (:func:`top_items`)."""

    rows = []
    for name in evaluation.results:
        level, _ = evaluation.levels[name]
        col = "chunk_id" if level == "chunk" else "doc_id"
        top = top_items(db, name, level, int(k)).assign(run_id=name)[["run_id", "query_id", col, "rank"]]
        labels = evaluation.qrels[name].rename(columns={"item_id": col})
        share = judged_at_k(top, labels, int(k), id_col=col)
        rows.append({"run": name, "judged_at_k": float(share["judged_at_k"].iloc[0]) if len(share) else 0.0})
    return pd.DataFrame(rows)


def _pools_by_run(db: Database, run: str) -> tuple[list[str], list[str]]:
    """(pools already pooling ``run``, pools of the same level and chunking that could take it)."""

    info = run_table(db).set_index("name")
    level, chunking = info.at[run, "level"], info.at[run, "chunking"]
    holding, could = [], []
    for row in list_pools(db).itertuples(index=False):
        runs = row.runs if isinstance(row.runs, list) else json.loads(row.runs) if isinstance(row.runs, str) else list(row.runs)
        same_chunking = (pd.isna(chunking) and pd.isna(row.chunking)) or str(chunking) == str(row.chunking)
        if run in runs:
            holding.append(str(row.name))
        elif row.level == level and (level == "doc" or same_chunking):
            could.append(str(row.name))
    return holding, could


def pools_for_run(db: Database, run: str) -> list[str]:
    """Pools a run can be added to: same level and chunking, not already pooling it."""
    return _pools_by_run(db, run)[1]


def pools_holding_run(db: Database, run: str) -> list[str]:
    """Pools that already pool ``run`` (its top results are pairs there, judged or not)."""
    return _pools_by_run(db, run)[0]


def add_run_to_pool(db: Database, pool: str, run: str):
    """Add ``run``'s top results to ``pool`` (:func:`workbench.services.pooling.pools.add_runs`)."""

    return add_runs(db, pool, [run])


def slices(db: Database, evaluation: RunEvaluation, measure: str) -> pd.DataFrame:
    """``run, tag, queries, mean`` per query tag (a query with several tags counts in each)."""

    tagged = query_tags(db)  # one reading of query tags for every slice report
    if tagged.empty:
        return pd.DataFrame(columns=["run", "tag", "queries", "mean"])
    values = per_query(evaluation, measure).merge(tagged, on="query_id")
    out = values.groupby(["run", "tag"], sort=True)["value"].agg(["count", "mean"]).reset_index()
    return out.rename(columns={"count": "queries"})


def latencies(db: Database, runs: list[str]) -> dict:
    """``{run: latency in ms}``: the p95 of the run's stored per-query latencies (table
    ``run_latencies``: our retrievers, the harness and imported sidecars write it), else a
    ``latency_ms`` (or numeric ``latency``) the run's parameters record."""

    stored = latency_summary(db, list(runs)).set_index("run")["p95_ms"]
    info = run_table(db).set_index("name")
    out = {name: float(stored[name]) for name in runs if name in stored.index and np.isfinite(stored[name])}
    for name in runs:
        if name in out:
            continue
        params = info.at[name, "params"] if name in info.index else {}
        value = (params or {}).get("latency_ms", (params or {}).get("latency"))
        if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
            out[name] = float(value)
    return out


def pareto_frontier(points: pd.DataFrame) -> pd.Series:
    """True for rows (``quality``, ``latency``) that no other row dominates: another row with
    quality >= and latency <=, and one of them strictly."""
    q = points["quality"].to_numpy(dtype=float)
    t = points["latency"].to_numpy(dtype=float)
    better_or_equal = (q[None, :] >= q[:, None]) & (t[None, :] <= t[:, None])
    strictly = (q[None, :] > q[:, None]) | (t[None, :] < t[:, None])
    dominated = (better_or_equal & strictly).any(axis=1)
    return pd.Series(~dominated, index=points.index)


def compare(evaluation: RunEvaluation, measures: list[str], *, test: str = "randomization", seed: int = 0,
            n_resamples: int = 5000):
    """Paired tests of every run against the first, Benjamini–Hochberg over all rows
    (:func:`workbench.core.metrics.comparison.compare_runs`)."""

    tables = {name: res.per_query for name, res in evaluation.results.items()}
    return compare_runs(tables, measures, test=test, seed=seed, n_resamples=n_resamples)


def stage_report(evaluation: RunEvaluation, measures: list[str]):
    """:func:`workbench.core.metrics.stages.stage_report` with the runs as stages, in the order chosen."""

    return report({name: res.per_query for name, res in evaluation.results.items()}, measures)


def stage_lift(report, *, pool_measure: str, pre_stage: str, post_stage: str, measure: str):

    return lift(report, pool=(pre_stage, pool_measure), pre=(pre_stage, measure), post=(post_stage, measure))
