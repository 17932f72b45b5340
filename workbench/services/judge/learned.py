"""``workbench judge learn``: a judge that learns from its SMEs (project issue 35).

:func:`learn` fits a small model on a calibration sample's **tuning** part only (SME reference
labels, :func:`workbench.services.calibration.samples.tuning_pairs`) whose features are the
grades of existing judge configurations and retrieval signals of every pool pair
(:mod:`workbench.core.judging.learned`), then grades every pair of the sample's pool as a new
judge configuration: one ``judge_jobs`` row (``judge = model = prompt_id = 'learned'``,
``prompt_hash`` = ``config_key`` = the fingerprint below) and one ``llm`` / ``ok`` judgment per
pair with ``reason`` ``p(relevant)=0.734`` and the probability in ``raw_response``. The gate,
the qrels rule, PPI and agreement treat it like any other judge: it is trusted only once
``calibrate gate --judge learned`` passes it on the held-out part, which the fit never saw.

The configuration's key is sha256 of: the feature version and names, the source
configurations, the pool, the sample, the fingerprint of the tuning part's SME labels
(:func:`workbench.services.calibration.verdicts.labels_fingerprint`), the seed, the relevance
grade and the gate's TPR/TNR targets. Held-out labels are in none of them, so relabelling the
held-out part changes nothing here; relabelling the tuning part gives another key: the earlier
learned configuration keeps its (now stale) grades and verdict, and a new ``learn`` run makes
a new configuration that must be gated on its own. Learning again with unchanged inputs finds
the configuration's job and writes nothing.

Refused (one line, :class:`~workbench.errors.InputError`): fewer than
:data:`~workbench.core.judging.learned.MIN_LABELS` tuning labels or fewer than
:data:`~workbench.core.judging.learned.MIN_PER_CLASS` of either class; no source
configuration; a source that did not grade the pool.

Texts are read and tokenised in blocks of ``block`` pairs (two passes: document frequencies over
the pool's distinct passages, then the pairs' BM25, overlap and dense cosine), so memory holds
one block of texts (and of passage vectors) and the pool's numeric features. The dense cosine
(:mod:`workbench.services.judge.learned_dense`) reuses a pooled dense run's scores and the
embeddings cache, encodes only what neither holds, and caches it, so a second ``learn`` encodes
nothing; without the dense extra it is left out with a note (another feature list, another key).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench import lazylibs
from workbench.core.calibration.gate import GateThresholds
from workbench.core.calibration.sample import TUNING
from workbench.core.judging import learned as core
from workbench.errors import ConfigError, InputError, clip
from workbench.retrieval.bm25 import Bm25Params, make_tokenizer, tokenize_ids
from workbench.services import access, lazy
from workbench.services.calibration import verdicts
from workbench.services.calibration.samples import tuning_pairs
from workbench.services.judge import learned_dense
from workbench.store import calibration as cal_store
from workbench.store import learned_judge as store
from workbench.store.database import Database
from workbench.store.judging import create_job, find_job, recount_job, update_job, write_job_judgments
from workbench.store.pools import read_pool

JUDGE = "learned"
BLOCK = 5000
PAIR = ["query_id", "doc_id", "chunk_id"]
#: The text signals the compact ``signals`` candidates read beside the grades (and ``cosine[...]``).
SIGNALS = ("cosine_z", "bm25", "bm25_z", "overlap", "log_chars")


@dataclass
class LearnResult:
    """What :func:`learn` fitted and wrote."""

    config: str
    label: str
    pool: str
    sample: str
    sources: list[str]
    features: list[str]
    tuning: int
    relevant: int
    model: str
    cv_log_loss: dict[str, float]
    folds: int
    operating: core.OperatingPoint
    cuts: tuple[float, float]
    graded: int
    grade_counts: dict[int, int]
    seed: int
    created: bool
    notes: list[str] = field(default_factory=list)
    #: the dense cosine's encoder (cache key), reused runs and counts of reused / cached / encoded items
    dense: dict | None = None

    def summary(self) -> str:
        losses = ", ".join(f"{k} {v:.3f}" for k, v in self.cv_log_loss.items())
        head = ("learned judge" if self.created else "learned judge (unchanged, already stored)")
        lines = [
            f"{head} {self.label} on pool {self.pool!r}, trained on the tuning part of sample {self.sample!r}: "
            f"{self.tuning} SME labels ({self.relevant} relevant), seed {self.seed}",
            f"  sources: {', '.join(self.sources)}; {len(self.features)} features",
            *([self._dense_line()] if self.dense else []),
            f"  model: {self.model} ({self.folds}-fold cross-validated log loss: {losses})",
            f"  operating point: {self.operating.words()}",
            f"  graded {self.graded:,} pool pairs: " + ", ".join(f"{g}: {n:,}" for g, n in self.grade_counts.items()),
            f"  held-out figures and the gate: {{command:calibrate report --sample {self.sample} --judge "
            f"{self.config[:12]}}}; {{command:calibrate gate --sample {self.sample} --judge {self.config[:12]}}}",
        ]
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])

    def _dense_line(self) -> str:
        d = self.dense
        reused = f", {d['reused_scores']:,} pairs from dense run(s) {', '.join(d['reused_runs'])}" if d["reused_runs"] else ""
        return (f"  dense cosine with {d['model']}: {d['cached_passages']:,} passages from the embeddings cache, "
                f"{d['encoded_passages']:,} encoded now{reused}")

    def as_dict(self) -> dict:
        return {"config": self.config, "label": self.label, "pool": self.pool, "sample": self.sample,
                "sources": self.sources, "features": self.features, "tuning": self.tuning, "relevant": self.relevant,
                "model": self.model, "cv_log_loss": self.cv_log_loss, "folds": self.folds,
                "operating_point": {"threshold": self.operating.threshold, "rule": self.operating.rule,
                                    "cv_tpr": self.operating.tpr, "cv_tnr": self.operating.tnr,
                                    "cv_kappa": self.operating.kappa,
                                    "expected_kappa": self.operating.expected_kappa},
                "cuts": list(self.cuts), "graded": self.graded,
                "grade_counts": {str(k): v for k, v in self.grade_counts.items()}, "seed": self.seed,
                "created": self.created, "notes": self.notes, "dense": self.dense}


# -- features -----------------------------------------------------------------------------------

def _rows_of(spans: pd.DataFrame, keys: pd.DataFrame) -> np.ndarray:
    """Row index in ``spans`` of each row of ``keys`` (-1 when absent)."""
    index = spans[PAIR].assign(_row=np.arange(len(spans)))
    merged = keys[PAIR].merge(index, on=PAIR, how="left")
    return merged["_row"].fillna(-1).astype(np.int64).to_numpy()


def _tokenizer():

    return make_tokenizer(Bm25Params())


def _counts(ids: list[list[int]], vocabulary: int):
    lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=len(ids))
    indptr = np.r_[0, np.cumsum(lengths)]
    indices = np.fromiter((i for t in ids for i in t), dtype=np.int64, count=int(indptr[-1]))
    m = lazylibs.scipy_sparse.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(ids), vocabulary))
    m.sum_duplicates()
    return m


def text_features(db: Database, pool: str, level: str, n_pairs: int, *, block: int = BLOCK,
                  on_block=None) -> dict[str, np.ndarray]:
    """``bm25``, ``overlap``, ``log_chars``, ``log_tokens`` of every pool pair (pair order).
    ``on_block(offset, passages)``: called with each block of pair texts read (the dense cosine
    reads them there, so the pool's texts are read once)."""

    tok = _tokenizer()
    df = np.zeros(0)
    n_docs, total_len = 0, 0
    for texts in store.passage_blocks(db, pool, level, block):  # pass 1: df over distinct passages
        ids = tokenize_ids(tok, texts, update_vocab=True, allow_empty=False)
        size = max(tok.word_to_id.values(), default=-1) + 1
        if len(df) < size:
            df = np.r_[df, np.zeros(size - len(df))]
        uniq = np.concatenate([np.unique(t) for t in ids if t] or [np.zeros(0, np.int64)]).astype(np.int64)
        df += np.bincount(uniq, minlength=len(df))[:len(df)]
        n_docs += len(texts)
        total_len += sum(len(t) for t in ids)
    vocabulary = max(len(df), 1)
    df = np.r_[df, np.zeros(vocabulary - len(df))]
    idf = core.idf_lucene(df, n_docs)
    avgdl = total_len / n_docs if n_docs else 1.0
    out = {k: np.zeros(n_pairs) for k in ("bm25", "overlap", "log_chars", "log_tokens")}
    query_ids: dict[str, list[int]] = {}
    offset = 0
    for frame in store.pair_text_blocks(db, pool, level, block):  # pass 2: each pair's query against its passage
        texts = frame["passage"].fillna("").astype(str).tolist()
        p_ids = [[i for i in t if i < vocabulary] for t in tokenize_ids(tok, texts, update_vocab=False,
                                                                        allow_empty=False)]
        todo = [q for q in dict.fromkeys(frame["query_text"].astype(str)) if q not in query_ids]
        if todo:
            for q, t in zip(todo, tokenize_ids(tok, todo, update_vocab=False, allow_empty=False)):
                query_ids[q] = [i for i in t if i < vocabulary]
        q_ids = [query_ids[q] for q in frame["query_text"].astype(str)]
        qm, pm = _counts(q_ids, vocabulary), _counts(p_ids, vocabulary)
        sl = slice(offset, offset + len(frame))
        out["bm25"][sl] = core.bm25_scores(qm, pm, idf, avgdl)
        out["overlap"][sl] = core.term_overlap(qm, pm)
        out["log_chars"][sl] = np.log1p(np.array([len(t) for t in texts], dtype=np.float64))
        out["log_tokens"][sl] = np.log1p(np.array([len(t) for t in p_ids], dtype=np.float64))
        if on_block is not None:
            on_block(offset, texts)
        offset += len(frame)
    return out


@dataclass
class DenseOptions:
    """The dense cosine feature (:mod:`workbench.services.judge.learned_dense`): ``enabled``;
    ``model`` (None: the pool's dense run's, else the default); ``encoder`` (a loaded one)."""

    enabled: bool = True
    model: str | None = None
    encoder: object = None
    batch_size: int = 64


def pool_features(db: Database, pool: str, level: str, sources: list[str], names: dict[str, str], *,
                  block: int = BLOCK, chunking: str | None = None, dense: DenseOptions | None = None,
                  info: dict | None = None) -> tuple[pd.DataFrame, core.FeatureTable]:
    """Every pool pair (``query_id, doc_id, chunk_id, start, end``, pair order) and its features
    (:mod:`workbench.core.judging.learned`). ``names``: a short name per source configuration.
    ``info`` (when given) receives ``dense``: the encoder's cache key and where the cosines came
    from, or ``dense_skipped``: why the cosine is left out."""

    info = {} if info is None else info
    spans = store.pool_pair_spans(db, pool, level)
    groups = pd.factorize(spans["query_id"])[0].astype(np.int64)
    table = core.FeatureTable()
    grades = store.pool_config_grades(db, pool, sources)
    filled = {}
    for config in sources:
        mine = grades[grades["config"] == config]
        rows = _rows_of(spans, mine)
        g = np.full(len(spans), np.nan)
        g[rows[rows >= 0]] = mine["grade"].to_numpy(dtype=np.float64)[rows >= 0]
        filled[config] = core.grade_features(table, names[config], g, groups)
    signals = store.pool_run_signals(db, pool)
    runs = sorted(signals["run"].astype(str).unique().tolist())
    ranks = np.full((len(spans), len(runs)), np.nan)
    scores = np.full((len(spans), len(runs)), np.nan)
    for j, run in enumerate(runs):
        mine = signals[signals["run"] == run]
        rows = _rows_of(spans, mine)
        keep = rows >= 0
        ranks[rows[keep], j] = mine["rank"].to_numpy(dtype=np.float64)[keep]
        scores[rows[keep], j] = mine["score"].to_numpy(dtype=np.float64)[keep]
    cosine = None
    dense = dense or DenseOptions()
    if dense.enabled and len(spans):
        try:
            cosine = learned_dense.prepare(db, pool, level, chunking, spans,
                                           {run: scores[:, j] for j, run in enumerate(runs)}, model=dense.model,
                                           encoder=dense.encoder, batch_size=dense.batch_size)
        except ConfigError as exc:  # the dense extra is not installed: learn from the other features
            info["dense_skipped"] = str(exc)
    text = text_features(db, pool, level, len(spans), block=block,
                         on_block=cosine.block if cosine is not None else None)
    table.add("bm25", text["bm25"])
    table.add("bm25_z", core.within_query_z(text["bm25"], groups))
    table.add("bm25_rank_share", core.within_query_rank_share(text["bm25"], groups))
    table.add("overlap", text["overlap"])
    table.add("overlap_z", core.within_query_z(text["overlap"], groups))
    table.add("log_chars", text["log_chars"])
    table.add("log_tokens", text["log_tokens"])
    if cosine is not None:
        table.add(f"cosine[{cosine.source.key}]", cosine.values)
        table.add("cosine_z", core.within_query_z(cosine.values, groups))
        table.add("cosine_rank_share", core.within_query_rank_share(cosine.values, groups))
        info["dense"] = {"model": cosine.source.key, "reused_runs": list(cosine.source.runs), **cosine.counts}
    for config in sources:
        core.grade_signal_features(table, names[config], filled[config], groups, text["bm25"],
                                   cosine.values if cosine is not None else None)
    core.run_features(table, runs, ranks, scores, groups)
    return spans, table


# -- learning -------------------------------------------------------------------------------------

def _sources(db: Database, pool: str, wanted: list[str] | None) -> list[str]:

    graded = cal_store.pool_configurations(db, pool)
    if wanted:
        return list(dict.fromkeys(verdicts.find_configuration(db, w, among=graded).key for w in wanted))
    learned = store.configs_of_judge(db, JUDGE)
    chosen = [k for k in graded if k not in learned]
    if not chosen:
        raise InputError(f"no judge configuration graded pool {clip(pool)}; grade it with {{command:judge}} or "
                         f"import an external judge's grades with {{command:import judgments}} first")
    return chosen


def tuning_labels(db: Database, sample: str) -> pd.DataFrame:
    """The sample's tuning part with SME reference labels (never a held-out pair)."""

    tuning = tuning_pairs(db, sample)
    return tuning[tuning["part"] == TUNING].reset_index(drop=True)  # tuning_pairs' promise, kept where it matters


def learn(db: Database, sample: str, *, sources: list[str] | None = None, seed: int = 0, settings=None,
          block: int = BLOCK, fit=core.fit, dense: DenseOptions | None = None) -> LearnResult:
    """Fit the learned judge on ``sample``'s tuning part and grade its pool (module docstring).
    ``fit``: the fitting function (tests pass a recording one); it receives tuning rows only.
    ``dense``: the dense cosine feature's options (:class:`DenseOptions`; default on)."""

    access.require("judge")
    access.require("see_all_labels")  # it learns from every SME's labels
    if settings is None:
        settings = lazy.config.load_settings()
    info = cal_store.read_sample(db, sample)
    if info is None:
        names = cal_store.read_samples(db)["name"].astype(str).tolist()
        raise InputError(f"there is no calibration sample named {clip(sample)}; samples: {', '.join(names) or 'none'}")
    pool = str(info["pool"])
    pool_info = read_pool(db, pool)
    if pool_info is None:
        raise InputError(f"sample {clip(sample)} was drawn from pool {clip(pool)}, which is gone")
    threshold = int(settings.get("calibration", "relevant_min_grade"))
    targets = GateThresholds.from_settings(settings)
    tuning = tuning_labels(db, sample)
    y = (tuning["grade"].to_numpy() >= threshold).astype(np.int64) if len(tuning) else np.zeros(0, np.int64)
    why = core.check_labels(y)
    if why is not None:
        raise InputError(f"sample {clip(sample)}: {why}; label more of its tuning pairs first")
    chosen = _sources(db, pool, sources)
    known = {c.key: c for c in verdicts.configurations(db)}
    short = {k: (known[k].label if k in known else k[:12]) for k in chosen}
    info: dict = {}
    spans, table = pool_features(db, pool, str(pool_info["level"]), chosen, short, block=block,
                                 chunking=pool_info.get("chunking"), dense=dense, info=info)
    rows = _rows_of(spans, tuning)
    notes = []
    if "dense_skipped" in info:
        notes.append(f"the dense cosine feature is left out: {info['dense_skipped']}")
    if (rows < 0).any():
        notes.append(f"{int((rows < 0).sum())} labelled tuning pairs are no longer in pool {pool!r} and were left out")
        keep = rows >= 0
        tuning, y, rows = tuning[keep].reset_index(drop=True), y[keep], rows[keep]
        why = core.check_labels(y)
        if why is not None:
            raise InputError(f"sample {clip(sample)}: {why}; label more of its tuning pairs first")
    x = table.matrix()
    w = tuning["weight"].to_numpy(dtype=np.float64)
    base = [i for i, n in enumerate(table.names) if n.startswith("grade[")]
    signals = [i for i, n in enumerate(table.names) if n in SIGNALS or n.startswith("cosine[")]
    groups = pd.factorize(spans["query_id"])[0].astype(np.int64)
    fitted = fit(x[rows], y, w, int(seed), groups=groups[rows], strata=tuning["stratum"].to_numpy(),
                 base_columns=base, signal_columns=signals)
    wn = w / w.mean()
    p_all = fitted.predict(x, groups)
    # the pool's probabilities set the threshold when the targets cannot be met: each pool pair
    # once, as the sample's inclusion weights re-weight the tuning labels to the pool
    op = core.operating_point(y, fitted.cv_probability, wn, min_tpr=targets.min_tpr, min_tnr=targets.min_tnr,
                              pool=p_all)
    cuts = core.grade_cuts(tuning["grade"].to_numpy(), fitted.cv_probability, wn, op.threshold, threshold)
    grades = core.grades_from_probability(p_all, op.threshold, *cuts)
    key = core.fingerprint("learned judge", core.FEATURE_VERSION, pool, sample, table.names, chosen,
                           verdicts.labels_fingerprint(tuning), int(seed), threshold, targets.min_tpr, targets.min_tnr)
    params = {"learned": {"sample": sample, "sources": chosen, "features": table.names, "model": fitted.name,
                          "cv_log_loss": fitted.scores, "folds": fitted.folds, "seed": int(seed),
                          "threshold": op.threshold, "rule": op.rule, "cuts": list(cuts),
                          "cv": {"tpr": op.tpr, "tnr": op.tnr, "kappa": op.kappa},
                          "expected_kappa": op.expected_kappa,
                          "tuning_labels": len(y), "relevant_min_grade": threshold,
                          "feature_version": core.FEATURE_VERSION,
                          "dense": ({"model": info["dense"]["model"], "reused_runs": info["dense"]["reused_runs"]}
                                    if "dense" in info else None)}}
    created = _write(db, pool, key, params, spans, grades, p_all)
    counts = {g: int((grades == g).sum()) for g in range(4)}
    label = verdicts.describe(db, key).label
    return LearnResult(key, label, pool, sample, [short[k] for k in chosen], table.names, len(y), int(y.sum()),
                       fitted.name, fitted.scores, fitted.folds, op, cuts, len(spans), counts, int(seed), created,
                       notes, info.get("dense"))


def _write(db: Database, pool: str, key: str, params: dict, spans: pd.DataFrame, grades: np.ndarray,
           p: np.ndarray) -> bool:
    """Store the configuration's job and one judgment per pair; False when its job holds them
    already (same inputs, same key: nothing to write)."""
    existing = find_job(db, pool, key)
    if existing is not None and store.job_has_judgments(db, existing["job_id"]):
        return False
    with db.transaction() as tx:
        job = create_job(tx, pool=pool, judge=JUDGE, model=JUDGE, base_url=None, prompt_id=JUDGE, prompt_hash=key,
                         params=params, samples=1, aggregate="majority", config_key=key, budget_usd=None)
        frame = spans.copy()
        frame["grade"] = grades
        frame["source"] = "llm"
        frame["assessor"] = JUDGE
        frame["prompt_hash"] = key
        frame["model"] = JUDGE
        frame["reason"] = [f"p(relevant)={v:.3f}" for v in p]
        frame["raw_response"] = [json.dumps({"p_relevant": round(float(v), 6)}) for v in p]
        frame["status"] = "ok"
        frame["job_id"] = job
        write_job_judgments(tx, frame)
        update_job(tx, job, state="finished", total=len(frame), started=True, finished=True)
        recount_job(tx, job)
    return True
