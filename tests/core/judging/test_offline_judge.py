"""The offline judge: hand-worked grades, properties, and its agreement figure in docs/judge.md."""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from tests.support.prerequisites import REPO
from workbench.core.judging.offline import (
    MODEL_LEXICAL,
    MODEL_LEXICAL_EMBEDDING,
    TUNED_SETTINGS,
    OfflineJudgeSettings,
    grade_pair,
    longest_shared_run,
    settings_fingerprint,
    stem,
    terms,
)

# Round numbers so the hand computations below are exact enough to follow.
HAND = OfflineJudgeSettings(
    query_weight=0.5, description_weight=0.3, phrase_weight=0.2, embedding_weight=0.5,
    threshold_1=0.2, threshold_2=0.45, threshold_3=0.75,
)
QUERY = "What is the laptop refresh cycle for engineers?"
PASSAGE = "Engineering laptops are refreshed every 36 months."


def test_stemmer_folds_common_forms():
    pairs = {
        "policies": "policy", "refreshed": "refresh", "refreshes": "refresh", "laptops": "laptop",
        "running": "run", "engineers": "engineer", "engineering": "engineer", "passes": "pass",
        "boxes": "box", "36": "36", "bus": "bus",
    }
    assert {w: stem(w) for w in pairs} == pairs
    assert stem("cycle") == stem("cycles")
    assert stem("base") == stem("based")


def test_terms_drop_stopwords_and_keep_numbers():
    assert terms(QUERY) == ["laptop", "refresh", "cycl", "engineer"]
    assert terms(PASSAGE) == ["engineer", "laptop", "refresh", "36", "month"]


def test_longest_shared_run_hand_examples():
    assert longest_shared_run(["a", "b", "c", "d"], ["x", "b", "c", "d", "a"]) == 3
    assert longest_shared_run(["a", "b"], ["b", "a"]) == 1
    assert longest_shared_run(["a"], []) == 0


def test_hand_worked_query_only():
    # Q = {laptop, refresh, cycl, engineer}; 3 found -> coverage 0.75; "laptop refresh" -> run 2,
    # phrase 2/4 = 0.5. No description: (0.5 + 0.3)·0.75 + 0.2·0.5 = 0.70 -> ≥ 0.45, < 0.75 -> 2.
    graded = grade_pair(QUERY, PASSAGE, settings=HAND)
    assert graded.grade == 2
    assert graded.model == MODEL_LEXICAL
    assert graded.features["coverage"] == 0.75
    assert graded.features["longest_phrase"] == 2
    assert graded.features["score"] == pytest.approx(0.70)
    assert graded.reason.startswith("3 of 4 query terms found (missing: cycle); longest shared phrase 2 words.")
    assert "not an LLM" in graded.reason


def test_hand_worked_with_description_and_embedding():
    description = "States that laptops are refreshed every 36 months"
    # D = {stat, laptop, refresh, 36, month}: 4 of 5 in the passage -> 0.8.
    # lexical = 0.5·0.75 + 0.3·0.8 + 0.2·0.5 = 0.715 -> grade 2
    graded = grade_pair(QUERY, PASSAGE, description=description, settings=HAND)
    assert graded.features["description_coverage"] == pytest.approx(0.8)
    assert graded.features["score"] == pytest.approx(0.715)
    assert graded.grade == 2
    assert "80% of the description's terms found" in graded.reason
    # with cosine 0.9: 0.5·0.715 + 0.5·0.9 = 0.8075 -> grade 3, named as the embedding variant
    graded = grade_pair(QUERY, PASSAGE, description=description, embedding_similarity=0.9, settings=HAND)
    assert graded.features["score"] == pytest.approx(0.8075)
    assert (graded.grade, graded.model) == (3, MODEL_LEXICAL_EMBEDDING)
    # a negative cosine counts as 0, never below: 0.5·0.715 = 0.3575 -> grade 1
    assert grade_pair(QUERY, PASSAGE, description=description, embedding_similarity=-0.4, settings=HAND).grade == 1


def test_idf_weighting_hand_example():
    # only "cycl" is missing; with idf cycl=3 and the rest 1: found 3 of 6 -> 0.5
    idf = {"laptop": 1.0, "refresh": 1.0, "engineer": 1.0, "cycl": 3.0}
    graded = grade_pair(QUERY, PASSAGE, idf=idf, settings=HAND)
    assert graded.features["coverage"] == pytest.approx(0.5)
    assert "idf-weighted coverage 0.50" in graded.reason
    # a term missing from the idf table counts as the rarest known one
    graded = grade_pair("laptop zebra", "laptop", idf={"laptop": 1.0, "other": 4.0}, settings=HAND)
    assert graded.features["coverage"] == pytest.approx(1 / 5)


def test_empty_and_wordless_inputs_grade_zero():
    assert grade_pair(QUERY, "").grade == 0
    assert grade_pair(QUERY, "  -- ** ").grade == 0
    assert "empty" in grade_pair(QUERY, "").reason
    graded = grade_pair("???", PASSAGE)
    assert graded.grade == 0 and "no words" in graded.reason


def test_stopword_only_query_falls_back_to_all_words():
    graded = grade_pair("what is it", "It is what it is.", settings=HAND)
    assert graded.features["query_terms"] == 3 and graded.features["matched_terms"] == 3
    assert graded.grade >= 1


def test_irrelevant_passage_grades_zero_with_defaults():
    assert grade_pair(QUERY, "The cafeteria opens at noon on Fridays.").grade == 0


def test_tuned_settings_are_ordered_and_weights_sum_to_one():
    for s in TUNED_SETTINGS.values():
        assert 0 < s.threshold_1 < s.threshold_2 < s.threshold_3 <= 1
        assert math.isclose(s.query_weight + s.description_weight + s.phrase_weight, 1.0)


VOCAB = ["laptop", "refresh", "cycle", "engineers", "the", "of", "what", "contractor", "36",
         "months", "policy", "loaner", "is", "travel", "expense", "approved", "manager"]
texts = st.lists(st.sampled_from(VOCAB), min_size=0, max_size=12).map(" ".join)
queries = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join)
descriptions = st.one_of(st.none(), texts)
similarities = st.one_of(st.none(), st.floats(min_value=-1, max_value=1))


@settings(max_examples=300, deadline=None)
@given(queries, texts, texts, descriptions, similarities)
def test_passage_containing_the_whole_query_never_grades_zero(query, before, after, description, sim):
    graded = grade_pair(query, f"{before} {query} {after}", description=description, embedding_similarity=sim)
    assert graded.grade >= 1


@settings(max_examples=200, deadline=None)
@given(queries, descriptions, similarities)
def test_empty_passage_always_grades_zero(query, description, sim):
    assert grade_pair(query, "", description=description, embedding_similarity=sim).grade == 0


@settings(max_examples=300, deadline=None)
@given(queries, texts, descriptions, similarities, st.data())
def test_grade_is_monotonic_in_overlap(query, passage, description, sim, data):
    """Appending a query word to the passage never lowers the score or the grade."""
    word = data.draw(st.sampled_from(query.split()))
    before = grade_pair(query, passage, description=description, embedding_similarity=sim)
    after = grade_pair(query, f"{passage} {word}", description=description, embedding_similarity=sim)
    assert after.features.get("score", 0) >= before.features.get("score", 0) - 1e-12
    assert after.grade >= before.grade


@settings(max_examples=100, deadline=None)
@given(queries, texts)
def test_grade_equals_thresholds_applied_to_score(query, passage):
    graded = grade_pair(query, passage, settings=HAND)
    if "score" in graded.features and graded.features.get("matched_terms", 0) < graded.features.get("query_terms", 0):
        expected = sum(graded.features["score"] >= t for t in HAND.thresholds)
        assert graded.grade == expected


def _agreement_module():
    spec = importlib.util.spec_from_file_location("offline_judge_agreement", REPO / "benchmarks/offline_judge_agreement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fast_kappa_used_for_tuning_matches_scikit_learn():
    module = _agreement_module()
    rng = np.random.default_rng(20261130)
    checked = 0
    for _ in range(50):
        sme = rng.integers(0, 4, size=40)
        pred = rng.integers(0, 4, size=(3, 40))
        pred[0] = sme  # perfect agreement in one row
        fast = module.kappa_fast(sme, pred)
        for row, value in zip(pred, fast, strict=True):
            assert value == pytest.approx(cohen_kappa_score(sme, row, labels=[0, 1, 2, 3]))
            checked += 1
    assert checked == 150


def test_docs_report_the_measured_demo_agreement(capsys):
    results = _agreement_module().main([])
    key = "offline-lexical, query+description: settings in use (in-sample)"
    measured = results[key]
    assert measured["pairs"] == 209
    readme = (REPO / "docs" / "judge.md").read_text()
    section = readme[readme.index("## Offline judge"):]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    for name in ("kappa_4", "kappa_binary", "tpr", "tnr"):
        assert f"{measured[name]:.2f}" in section, name
    cv = results["offline-lexical, query+description: 5-fold CV by query"]
    assert f"{cv['kappa_4']:.2f}" in section
    assert re.search(r"not an LLM", section)


def test_settings_fingerprint_is_stable_hex():
    assert settings_fingerprint() == settings_fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", settings_fingerprint())
