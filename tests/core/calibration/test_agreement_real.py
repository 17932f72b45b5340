"""Agreement figures on real human-vs-LLM label sets, against scikit-learn and the reference
values in the datasets' SOURCE.md files.

- LLMJudge (TREC DL 2023): NIST test labels vs each of the 33 LLM submissions (4,423 pairs each).
- TREC RAG 2025: NIST labels vs UMBRELA v2 (10,284 pairs, grades 0-4).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from tests.support.prerequisites import shared_path
from workbench.core.calibration.agreement import (
    confusion,
    figures_from_confusion,
    kappa_from_confusion,
    krippendorff_alpha,
)
from workbench.core.calibration.label_pairs import pair_files, parse_label_file

pytestmark = pytest.mark.shared

# SOURCE.md of ../shared/datasets/llmjudge: exact, kappa, linear, quadratic, binary (>= 2), alpha ordinal
# (labels as given, out-of-range labels included).
LLMJUDGE_REFERENCE = {
    "willia-umbrela1": (0.5338, 0.2863, 0.3963, 0.5044, 0.3985, 0.4918),
    "h2oloo-fewself": (0.5196, 0.2774, 0.3998, 0.5046, 0.4280, 0.4958),
    "Olz-gpt4o": (0.5132, 0.2625, 0.3846, 0.5069, 0.3657, 0.5020),
    "RMITIR-GPT4o": (0.5211, 0.2388, 0.3543, 0.4564, 0.3961, 0.4108),
    "RMITIR-llama70B": (0.4931, 0.2655, 0.3866, 0.4878, 0.3916, 0.4871),
    "NISTRetrieval-instruct0": (0.4284, 0.1877, 0.2799, 0.3828, 0.3021, 0.3819),
    "TREMA-nuggets": (0.3651, 0.0604, 0.1079, 0.1555, 0.0992, 0.1691),
    "prophet-setting4": (0.4920, 0.1471, 0.1863, 0.2278, 0.1409, 0.1623),
}
RAG25_REFERENCE = (0.4412, 0.2333, 0.3729, 0.4918, 0.4310, 0.4926)


def _pairs(reference_path, candidate_path, scale_max=3, clip=False):
    ref = parse_label_file(reference_path.read_text(), str(reference_path), scale_max=scale_max, clip=clip)
    cand = parse_label_file(candidate_path.read_text(), str(candidate_path), scale_max=scale_max, clip=clip)
    return pair_files(ref, cand)


def _raw_pairs(reference_path, candidate_path):
    """Labels exactly as given (no scale check), paired by (query, item): the SOURCE.md setting."""
    def read(path):
        out = {}
        for line in path.read_text().splitlines():
            f = line.split()
            if len(f) == 4:
                out[(f[0], f[2])] = int(f[3])
        return out

    ref, cand = read(reference_path), read(candidate_path)
    keys = sorted(set(ref) & set(cand))
    return np.array([ref[k] for k in keys]), np.array([cand[k] for k in keys])


def _figures_as_given(r, c):
    levels = sorted(set(r.tolist()) | set(c.tolist()))
    C = confusion(r, c, levels)
    f = figures_from_confusion(C, levels, threshold=2)
    return (float(f["exact"]), float(f["kappa_graded"]), float(f["kappa_linear"]),
            float(f["kappa_quadratic"]), float(f["kappa"]),
            krippendorff_alpha(np.vstack([r, c]).astype(float), level="ordinal"))


def test_llmjudge_every_submission_equals_scikit_learn():
    root = shared_path("datasets", "llmjudge")
    human = root / "data" / "llmjudge_test_qrel_idx.txt"
    runs = sorted((root / "submissions" / "scores").glob("*.txt"))
    checked = 0
    for run in runs:
        r, c = _raw_pairs(human, run)
        assert len(r) == 4423, run.name
        labels = sorted(set(r.tolist()) | set(c.tolist()))
        C = confusion(r, c, labels)
        np.testing.assert_array_equal(C, confusion_matrix(r, c, labels=labels))
        for weights in (None, "linear", "quadratic"):
            assert float(kappa_from_confusion(C, weights)) == pytest.approx(
                cohen_kappa_score(r, c, weights=weights), abs=1e-12), (run.name, weights)
        f = figures_from_confusion(C, labels, threshold=2)
        rb, cb = r >= 2, c >= 2
        assert float(f["kappa"]) == pytest.approx(cohen_kappa_score(rb, cb), abs=1e-12), run.name
        tn, fp, fn, tp = confusion_matrix(rb, cb, labels=[False, True]).ravel()
        assert float(f["tpr"]) == pytest.approx(tp / (tp + fn), abs=1e-12)
        assert float(f["tnr"]) == pytest.approx(tn / (tn + fp), abs=1e-12)
        assert float(f["precision"]) == pytest.approx(tp / (tp + fp), abs=1e-12)
        assert float(f["msd"]) == pytest.approx(np.mean(c - r), abs=1e-12)
        checked += 1
    assert checked == 33


def test_llmjudge_reference_values_reproduced():
    root = shared_path("datasets", "llmjudge")
    human = root / "data" / "llmjudge_test_qrel_idx.txt"
    checked = 0
    for run, expected in LLMJUDGE_REFERENCE.items():
        r, c = _raw_pairs(human, root / "submissions" / "scores" / f"{run}.txt")
        got = _figures_as_given(r, c)
        for name, g, e in zip(("exact", "kappa", "linear", "quadratic", "binary", "alpha"), got, expected):
            assert round(g, 4) == pytest.approx(e, abs=1e-9), (run, name, g, e)
            checked += 1
    assert checked == 8 * 6


def test_llmjudge_on_the_fixed_scale_equals_scikit_learn_with_labels():
    """Through the label-file reader on the 0-3 scale (RMITIR-llama70B and h2oloo-zeroshot2
    carry grades 5 and 10: refused, or clipped with --clip) against scikit-learn with the
    explicit label set 0-3."""
    root = shared_path("datasets", "llmjudge")
    human = root / "data" / "llmjudge_test_qrel_idx.txt"
    checked = 0
    for run in sorted((root / "submissions" / "scores").glob("*.txt")):
        paired = _pairs(human, run, clip=True)
        r, c = paired.reference, paired.candidate
        C = confusion(r, c)
        np.testing.assert_array_equal(C, confusion_matrix(r, c, labels=[0, 1, 2, 3]))
        for weights in (None, "linear", "quadratic"):
            assert float(kappa_from_confusion(C, weights)) == pytest.approx(
                cohen_kappa_score(r, c, labels=[0, 1, 2, 3], weights=weights), abs=1e-12)
        checked += 1
    assert checked == 33


def test_rag25_umbrela_reference_values_on_the_0_to_4_scale():
    root = shared_path("datasets", "trec-rag-2025-umbrela")
    paired = _pairs(root / "qrels.rag25.test.txt", root / "qrels.rag25.test-umbrela2.txt", scale_max=4)
    r, c = paired.reference, paired.candidate
    assert len(r) == 10284 and paired.only_reference == 0 and paired.only_candidate == 0
    levels = [0, 1, 2, 3, 4]
    C = confusion(r, c, levels)
    np.testing.assert_array_equal(C, confusion_matrix(r, c, labels=levels))
    checked = 0
    for weights in (None, "linear", "quadratic"):
        assert float(kappa_from_confusion(C, weights)) == pytest.approx(
            cohen_kappa_score(r, c, weights=weights), abs=1e-12)
        checked += 1
    got = _figures_as_given(r, c)
    for name, g, e in zip(("exact", "kappa", "linear", "quadratic", "binary", "alpha"), got, RAG25_REFERENCE):
        assert round(g, 4) == pytest.approx(e, abs=1e-9), (name, g, e)
        checked += 1
    assert checked == 3 + 6
