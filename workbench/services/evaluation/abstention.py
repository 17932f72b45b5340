"""How well stored runs and generated answers abstain on a project's unanswerable queries
(:mod:`workbench.core.rag.abstention` holds the formulas; which queries are unanswerable is
decided in :mod:`workbench.services.qrels.answerability`). Unanswerable queries are left out of
recall@k, MRR and nDCG (:func:`answerable_ranking`) and scored here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.core.formats.lines import decode_utf8, read_json_objects
from workbench.core.metrics.qrels_and_runs import Qrels, Run
from workbench.core.rag import abstention as core
from workbench.errors import ConfigError, InputError, clip
from workbench.services import access, lazy
from workbench.services.qrels.answerability import query_answerability, unanswerable_ids
from workbench.services.qrels.export import qrels_table
from workbench.store import query_kinds as store
from workbench.store.database import Database
from workbench.store.runs import read_run_info, read_run_rows
from workbench.store.synthetic_queries import synthetic_query_ids


@dataclass(frozen=True)
class AbstentionReport:
    """One system's abstention figures. ``kind`` is ``run`` (top-score threshold) or ``answers``
    (flags); ``threshold_source`` says where the threshold came from (``given`` or ``best``:
    the highest balanced accuracy on these same queries, an optimistic choice)."""

    name: str
    kind: str
    rates: core.AbstentionRates
    per_query: pd.DataFrame  # query_id, unanswerable, top_score (runs), abstained, correct
    counts: dict[str, int]
    threshold: float | None = None
    threshold_source: str | None = None
    curve: pd.DataFrame | None = None
    auc: float | None = None

    def aggregate(self) -> dict[str, float]:
        out = {k: v for k, v in self.rates.as_dict().items()
               if k in ("abstention_rate", "false_abstention_rate", "balanced_accuracy")}
        if self.auc is not None:
            out["auc"] = self.auc
        return out


def _counts(per_query: pd.DataFrame, only_in: int, missing: int, synthetic: int = 0) -> dict[str, int]:
    u = per_query["unanswerable"].to_numpy(dtype=bool)
    return {"queries": int(len(per_query)), "unanswerable": int(u.sum()), "answerable": int((~u).sum()),
            "missing_from_run": int(missing), "only_in_run": int(only_in), "synthetic_left_out": int(synthetic)}


def scored_queries(db: Database) -> tuple[pd.DataFrame, set[str]]:
    """The queries abstention scores (:func:`query_answerability` without the synthetic queries
    ``workbench synth`` made: each is answerable by construction, so hundreds of them would drown
    the project's own queries) and the synthetic ids left out."""

    marks = query_answerability(db)
    synthetic = synthetic_query_ids(db)
    if synthetic:
        marks = marks[~marks["query_id"].isin(synthetic)].reset_index(drop=True)
    return marks, synthetic


def run_abstention(db: Database, run: str, threshold: float | None = None) -> AbstentionReport:
    """A stored run abstains on a query when its top score is below ``threshold`` (or it returned
    nothing for the query). ``threshold`` None: the best balanced accuracy of the curve."""
    if threshold is not None and not math.isfinite(threshold):
        raise ConfigError(f"the threshold must be a finite number, got {threshold}")
    runs = set(store.run_names_with_params(db)["name"])
    if run not in runs:
        raise InputError(f"no run {clip(run)} in the project; runs: {', '.join(sorted(runs)) or 'none'}")
    marks, synthetic = scored_queries(db)
    tops = store.run_top_scores(db, run)
    tops = tops[~tops["query_id"].astype(str).isin(synthetic)]
    frame = marks[["query_id", "unanswerable"]].merge(tops[["query_id", "top_score"]], on="query_id", how="left")
    only_in = int((~tops["query_id"].isin(marks["query_id"])).sum())
    missing = int(frame["top_score"].isna().sum())
    top = frame["top_score"].to_numpy(dtype=np.float64)
    curve = core.threshold_curve(top, frame["unanswerable"].to_numpy())
    source = "given"
    if threshold is None:
        threshold, source = core.best_threshold(curve), "best"
    abstained = core.abstains_at(top, threshold)
    frame["abstained"] = abstained
    frame["correct"] = abstained == frame["unanswerable"].to_numpy(dtype=bool)
    return AbstentionReport(run, "run", core.rates(frame["unanswerable"], abstained), frame,
                            _counts(frame, only_in, missing, len(synthetic)), threshold, source, curve,
                            core.curve_auc(curve))


def read_answers_file(path: str | Path, pattern: str = core.ABSTENTION_PATTERN) -> pd.DataFrame:
    """``query_id, answer, abstained`` from an answers JSONL file: each line has ``query_id`` and
    an ``abstained`` flag (true/false) or an ``answer`` text (abstains when empty or matching
    ``pattern``)."""

    return read_answers(lazy.core_metrics_readers.check_regular_file(path).read_bytes(), str(path), pattern)


def read_answers(data: bytes, path: str, pattern: str = core.ABSTENTION_PATTERN) -> pd.DataFrame:
    """:func:`read_answers_file` on bytes (an upload); ``path`` names it in messages."""

    rows, seen = [], {}
    for line, rec in read_json_objects(decode_utf8(data, str(path)), str(path)):
        qid = rec.get("query_id")
        if qid is None or str(qid) == "":
            raise InputError("each answer needs a query_id", path=str(path), line=line)
        qid = str(qid)
        if qid in seen:
            raise InputError(f"query {clip(qid)} is answered twice (first on line {seen[qid]})", path=str(path), line=line)
        seen[qid] = line
        flag, text = rec.get("abstained"), rec.get("answer")
        if flag is not None and not isinstance(flag, bool):
            raise InputError(f"'abstained' must be true or false, got {clip(str(flag))}", path=str(path), line=line)
        if flag is None and "answer" not in rec:
            raise InputError("an answer needs an 'abstained' flag or an 'answer' text", path=str(path), line=line)
        rows.append({"query_id": qid, "answer": None if text is None else str(text),
                     "abstained": flag if flag is not None else core.answer_abstains(text, pattern)})
    if not rows:
        raise InputError("the answers file has no answer", path=str(path))
    return pd.DataFrame(rows, columns=["query_id", "answer", "abstained"])


def answers_abstention(db: Database, name: str, answers: pd.DataFrame) -> AbstentionReport:
    """Abstention of generated answers (``query_id, abstained``) on the project's queries. Only
    the queries that have an answer are scored; the others are counted as missing (an answer
    set usually covers a sample of the queries)."""
    marks, synthetic = scored_queries(db)
    answers = answers[~answers["query_id"].astype(str).isin(synthetic)]
    frame = marks[["query_id", "unanswerable"]].merge(answers[["query_id", "abstained"]], on="query_id", how="inner")
    missing = int(len(marks) - len(frame))
    only_in = int((~answers["query_id"].isin(marks["query_id"])).sum())
    if frame.empty:
        raise InputError(f"no answer of {clip(name)} is for a query of the project; check the query ids")
    frame["abstained"] = frame["abstained"].astype(bool)
    frame["correct"] = frame["abstained"] == frame["unanswerable"]
    return AbstentionReport(name, "answers", core.rates(frame["unanswerable"], frame["abstained"]), frame,
                            _counts(frame, only_in, missing, len(synthetic)))


def stored_answers_abstention(db: Database, name: str) -> AbstentionReport:
    answers = store.read_answers(db, name)
    if answers.empty:
        names = store.answer_set_names(db)
        raise InputError(f"no answers named {clip(name)} in the project; stored: {', '.join(names) or 'none'}")
    return answers_abstention(db, name, answers)


def store_answers(db: Database, name: str, answers: pd.DataFrame) -> int:
    """Store an answer set under a new ``name`` (an existing set is never replaced)."""
    access.require("import")
    if name in store.answer_set_names(db):
        raise InputError(f"answers named {clip(name)} already exist; choose another name")
    with db.transaction() as tx:
        return store.write_answers(tx, name, answers)


def answer_set_names(db: Database) -> list[str]:
    return store.answer_set_names(db)


def report_json(report: AbstentionReport) -> dict:
    """The ``eval``-like JSON entry: aggregate, per_query, counts (+ threshold and curve for runs)."""
    per_query = {}
    for row in report.per_query.itertuples(index=False):
        entry = {"unanswerable": bool(row.unanswerable), "abstained": bool(row.abstained),
                 "correct": bool(row.correct)}
        if report.kind == "run":
            entry["top_score"] = None if pd.isna(row.top_score) else float(row.top_score)
        per_query[str(row.query_id)] = entry
    out = {"kind": report.kind, "aggregate": report.aggregate(), "per_query": per_query,
           "counts": {**report.counts, **{k: v for k, v in report.rates.as_dict().items()
                                          if k.startswith("abstained_")}}}
    if report.kind == "run":
        out["threshold"] = report.threshold
        out["threshold_source"] = report.threshold_source
        out["curve"] = report.curve.to_dict(orient="records")
    return out


@dataclass(frozen=True)
class AnswerableRanking:
    """Ranking measures of a stored run over the answerable queries only: the
    :class:`~workbench.core.metrics.evaluation.EvaluationResult` and the unanswerable queries left out."""

    run: str
    result: object  # EvaluationResult
    excluded_unanswerable: list[str]

    def counts(self) -> dict[str, int]:
        return {**self.result.counts(), "excluded_unanswerable": len(self.excluded_unanswerable)}


RANKING_MEASURES = ("recall@10", "mrr", "ndcg@10")


def answerable_ranking(db: Database, run: str, measures: Sequence[str] = RANKING_MEASURES, *,
                       source: str = "merged", rel: int = 1) -> AnswerableRanking:
    """recall@k, MRR, nDCG (or ``measures``) of a stored run against the project's qrels (at
    the run's level and chunking, from the span labels of ``source``), with the unanswerable
    queries dropped from the qrels first and counted: nothing to recall, so no score."""

    info = read_run_info(db, [run])
    if info.empty:
        raise InputError(f"no run {clip(run)} in the project")
    level = str(info["level"].iloc[0])
    chunking = info["chunking"].iloc[0]
    table = qrels_table(db, level=level, chunking=None if pd.isna(chunking) else str(chunking), source=source)
    unanswerable = set(unanswerable_ids(db))
    out = table["query_id"].isin(unanswerable)
    dropped = sorted(set(table.loc[out, "query_id"].astype(str)))
    table = table[~out]
    if table.empty:
        raise InputError("no answerable query has labels to evaluate against; label some pairs first")
    rows = read_run_rows(db, run)
    # the run's answers to unanswerable queries are not ranking results to score
    rows = rows[~rows["query_id"].isin(unanswerable)]
    key = "chunk_id" if level == "chunk" else "doc_id"
    qrels = Qrels(pa.array(table["query_id"].astype(str).tolist()), pa.array(table["item_id"].astype(str).tolist()),
                  table["grade"].to_numpy(dtype=np.int64))
    ranked = Run(pa.array(rows["query_id"].astype(str).tolist()), pa.array(rows[key].astype(str).tolist()),
                 rows["score"].to_numpy(dtype=np.float64), name=run)
    return AnswerableRanking(run, lazy.core_metrics_evaluation.evaluate(qrels, ranked, list(measures), rel=rel), dropped)
