"""How well does the offline judge agree with the demo's SME labels?

Pairs: every SME label in ``workbench/resources/demo/labels.jsonl`` (a graded character span of a
document for a query); the passage is the span's text. Agreement is reported at the default
settings in ``workbench.core.judging.offline`` (which were chosen by ``--tune`` on these same labels,
so that figure is in-sample) and, to be honest about it, under 5-fold cross-validation by query
(thresholds and weights tuned on 4/5 of the queries, graded on the held-out fifth).

Measures (scikit-learn): Cohen's kappa on the 4 grades and on relevant = grade ≥ 2, the true
positive rate (share of SME-relevant pairs the judge calls relevant) and true negative rate.

    .venv/bin/python benchmarks/offline_judge_agreement.py [--embedding] [--tune]

``--embedding`` adds the cosine similarity of the packaged all-MiniLM-L6-v2 embeddings (needs the
dense extra); ``--tune`` grid-searches weights and thresholds on all labels and prints the best.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import cohen_kappa_score, confusion_matrix

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.core.judging.offline import (
    OfflineJudgeSettings,
    default_settings,
    grade_pair,
)
from workbench.resources import DEMO_DIR


def load_pairs(demo: Path = DEMO_DIR) -> list[dict]:
    """One dict per SME label: query_id, query, description, passage, sme grade."""
    read = lambda name: [json.loads(x) for x in (demo / name).read_text().splitlines() if x.strip()]
    queries = {q["query_id"]: q for q in read("queries.jsonl")}
    docs = {d["doc_id"]: d["text"] for d in read("documents.jsonl")}
    pairs = []
    for label in read("labels.jsonl"):
        query = queries[label["query_id"]]
        pairs.append({
            "query_id": label["query_id"],
            "query": query["text"],
            "description": query.get("description"),
            "passage": docs[label["doc_id"]][label["start"]: label["end"]],
            "sme": int(label["grade"]),
        })
    return pairs


def embedding_similarities(pairs: list[dict]) -> np.ndarray:
    from workbench.retrieval.dense import encode, load_encoder

    encoder = load_encoder()
    q = encode(encoder, [p["query"] for p in pairs])
    d = encode(encoder, [p["passage"] for p in pairs])
    return np.sum(q * d, axis=1)


def features_matrix(pairs: list[dict], sims: np.ndarray | None, with_description: bool = True) -> np.ndarray:
    """Columns: coverage, description coverage, phrase (0..1), embedding (0..1 or nan), floor flag."""
    rows = []
    for i, p in enumerate(pairs):
        f = grade_pair(p["query"], p["passage"], description=p["description"] if with_description else None).features
        rows.append([
            f.get("coverage", 0.0),
            f.get("description_coverage", 0.0),
            min(f.get("longest_phrase", 0.0), 4) / 4,
            max(0.0, float(sims[i])) if sims is not None else np.nan,
            1.0 if f.get("matched_terms") == f.get("query_terms") else 0.0,
        ])
    return np.asarray(rows)


def kappa_fast(sme: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Unweighted Cohen's kappa of sme (n,) against each row of pred (T, n), 4 classes."""
    n = sme.shape[0]
    obs = (pred == sme[None, :]).mean(axis=1)
    p_sme = np.bincount(sme, minlength=4) / n
    p_pred = np.stack([(pred == g).mean(axis=1) for g in range(4)], axis=1)
    expected = p_pred @ p_sme
    return (obs - expected) / np.where(expected < 1, 1 - expected, 1)


def search(feats: np.ndarray, sme: np.ndarray, use_embedding: bool,
           with_description: bool = True) -> tuple[OfflineJudgeSettings, float]:
    grid = np.round(np.arange(0.05, 0.96, 0.05), 2)
    triples = np.array(list(itertools.combinations(grid, 3)))  # t1 < t2 < t3
    best = (default_settings(with_description=with_description, with_embedding=use_embedding), -2.0)
    weights = [(a / 10, b / 10, round(1 - a / 10 - b / 10, 1)) for a in range(11) for b in range(11 - a)
               if with_description or b == 0]
    emb_weights = [w / 10 for w in range(11)] if use_embedding else [None]
    for (wq, wd, wp), we in itertools.product(weights, emb_weights):
        lexical = wq * feats[:, 0] + wd * feats[:, 1] + wp * feats[:, 2]
        score = lexical if we is None else (1 - we) * lexical + we * feats[:, 3]
        pred = (score[None, :] >= triples[:, 0:1]).astype(int) + (score[None, :] >= triples[:, 1:2]) + (
            score[None, :] >= triples[:, 2:3])
        pred = np.where((feats[:, 4][None, :] == 1) & (pred < 1), 1, pred)
        kappas = kappa_fast(sme, pred)
        i = int(np.argmax(kappas))
        if kappas[i] > best[1] + 1e-12:
            t1, t2, t3 = (float(x) for x in triples[i])
            settings = OfflineJudgeSettings(wq, wd, wp, we if we is not None else 0.0, t1, t2, t3)
            best = (settings, float(kappas[i]))
    return best


def grades_with(pairs: list[dict], sims: np.ndarray | None, settings: OfflineJudgeSettings | None,
                with_description: bool = True) -> np.ndarray:
    return np.array([
        grade_pair(p["query"], p["passage"], description=p["description"] if with_description else None,
                   embedding_similarity=None if sims is None else float(sims[i]), settings=settings).grade
        for i, p in enumerate(pairs)
    ])


def agreement(sme: np.ndarray, judge: np.ndarray) -> dict[str, float]:
    rel_sme, rel_judge = sme >= 2, judge >= 2
    tn, fp, fn, tp = confusion_matrix(rel_sme, rel_judge, labels=[False, True]).ravel()
    return {
        "pairs": len(sme),
        "kappa_4": cohen_kappa_score(sme, judge, labels=[0, 1, 2, 3]),
        "kappa_binary": cohen_kappa_score(rel_sme, rel_judge, labels=[False, True]),
        "tpr": tp / (tp + fn) if tp + fn else float("nan"),
        "tnr": tn / (tn + fp) if tn + fp else float("nan"),
        "exact": float(np.mean(sme == judge)),
    }


def cross_validated(pairs: list[dict], sims: np.ndarray | None, feats: np.ndarray, sme: np.ndarray,
                    with_description: bool, folds: int = 5) -> np.ndarray:
    """Held-out grades: queries split into ``folds`` groups by sorted query id (no randomness)."""
    query_ids = sorted({p["query_id"] for p in pairs})
    fold_of = {q: i % folds for i, q in enumerate(query_ids)}
    fold = np.array([fold_of[p["query_id"]] for p in pairs])
    out = np.zeros_like(sme)
    for k in range(folds):
        train, test = fold != k, fold == k
        settings, _ = search(feats[train], sme[train], sims is not None, with_description)
        held = [p for p, t in zip(pairs, test, strict=True) if t]
        out[test] = grades_with(held, None if sims is None else sims[test], settings, with_description)
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--embedding", action="store_true", help="add the packaged MiniLM cosine similarity")
    parser.add_argument("--tune", action="store_true", help="grid-search settings on all labels and print them")
    args = parser.parse_args(argv)
    pairs = load_pairs()
    sme = np.array([p["sme"] for p in pairs])
    sims = embedding_similarities(pairs) if args.embedding else None
    results = {}
    for with_description in (True, False):
        feats = features_matrix(pairs, sims, with_description)
        settings = None  # the module's defaults for this mode
        mode = "query+description" if with_description else "query only"
        if args.tune:
            settings, k = search(feats, sme, sims is not None, with_description)
            print(f"best on all labels, {mode}: {settings} (kappa_4 {k:.3f})")
        name = ("offline-lexical+embedding" if sims is not None else "offline-lexical") + f", {mode}"
        results[f"{name}: settings in use (in-sample)"] = agreement(
            sme, grades_with(pairs, sims, settings, with_description))
        results[f"{name}: 5-fold CV by query"] = agreement(
            sme, cross_validated(pairs, sims, feats, sme, with_description))
    print(f"SME grade counts: {[int((sme == g).sum()) for g in range(4)]} (grades 0-3)")
    print(f"{'judge':66} {'pairs':>5} {'kappa4':>7} {'kappa2':>7} {'TPR':>6} {'TNR':>6} {'exact':>6}")
    for label, r in results.items():
        print(f"{label:66} {r['pairs']:>5} {r['kappa_4']:>7.3f} {r['kappa_binary']:>7.3f} "
              f"{r['tpr']:>6.2f} {r['tnr']:>6.2f} {r['exact']:>6.2f}")
    return results


if __name__ == "__main__":
    main()
