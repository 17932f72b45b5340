"""The learned judge's query-context features and its model, on hand-worked examples
(:mod:`workbench.core.judging.learned`)."""

from __future__ import annotations

import numpy as np

from workbench.core.judging import learned as core

# two queries: four pairs of query 0, two of query 1
GROUPS = np.array([0, 0, 0, 0, 1, 1])
GRADES = np.array([2.0, 2.0, 1.0, 2.0, 0.0, 3.0])


def test_rank_share_within_query_and_grade_by_hand():
    values = np.array([0.1, 0.3, 0.9, 0.2, 0.5, 0.4])
    # (query 0, grade 2) holds pairs 0, 1, 3 with 0.1 < 0.2 < 0.3; every other pair is alone in its bin
    assert np.allclose(core.within_grade_rank_share(values, GROUPS, GRADES), [0, 2 / 3, 0, 1 / 3, 0, 0])


def test_query_share_graded_relevant_with_a_missing_grade_filled_in():
    table = core.FeatureTable()
    grades = np.array([2.0, np.nan, 1.0, 3.0, 0.0, 3.0])
    filled = core.grade_features(table, "j", grades, GROUPS)
    # the missing grade takes the pool's mean grade, (2 + 1 + 3 + 0 + 3) / 5 = 1.8 (< 2)
    assert np.allclose(filled, [2, 1.8, 1, 3, 0, 3])
    share = table.columns[table.names.index("query_share_relevant[j]")]
    # query 0: 2 of its 4 pairs graded >= 2; query 1: 1 of 2
    assert np.allclose(share, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    table = core.FeatureTable()
    core.grade_features(table, "j", GRADES, GROUPS)
    assert np.allclose(table.columns[table.names.index("query_share_relevant[j]")], [0.75] * 4 + [0.5] * 2)


def test_grade_and_signal_interactions_by_hand():
    bm25 = np.array([5.0, 1.0, 7.0, 3.0, 2.0, 2.0])
    cosine = np.array([1.0, 3.0, 1.0, 3.0, 0.5, 0.7])  # query 0: mean 2, sd 1; query 1: mean 0.6, sd 0.1
    table = core.FeatureTable()
    core.grade_signal_features(table, "j", GRADES, GROUPS, bm25, cosine)
    col = dict(zip(table.names, table.columns))
    assert table.names == ["bm25_rank_in_grade[j]", "cosine_rank_in_grade[j]", "grade_x_cosine_z[j]",
                           "relevant_x_cosine_rank[j]"]
    # (query 0, grade 2): BM25 5, 1, 3 -> shares 2/3, 0, 1/3; cosine 1, 3, 3 -> 0, (1 + 1/2)/3 twice
    assert np.allclose(col["bm25_rank_in_grade[j]"], [2 / 3, 0, 0, 1 / 3, 0, 0])
    assert np.allclose(col["cosine_rank_in_grade[j]"], [0, 0.5, 0, 0.5, 0, 0])
    # z-scores -1, 1, -1, 1 and -1, 1, times grades 2, 2, 1, 2 and 0, 3
    assert np.allclose(col["grade_x_cosine_z[j]"], [-2, 2, -1, 2, 0, 3])
    # cosine rank shares in the query: 1s (0 + 1/2)/4, 3s (2 + 1/2)/4; query 1: 0, 1/2; kept where grade >= 2
    assert np.allclose(col["relevant_x_cosine_rank[j]"], [0.125, 0.625, 0, 0.625, 0, 0.5])
    # without a dense cosine only the BM25 column
    table = core.FeatureTable()
    core.grade_signal_features(table, "j", GRADES, GROUPS, bm25, None)
    assert table.names == ["bm25_rank_in_grade[j]"]


def test_the_model_is_the_average_even_when_one_candidate_scores_better():
    # the label is exactly "grade >= 2" and every other column is noise: the logistic on the grade
    # alone has the lowest cross-validated log loss, yet the model is the average of the candidates
    rng = np.random.default_rng(0)
    n = 120
    grade = rng.integers(0, 4, n).astype(float)
    y = (grade >= 2).astype(int)
    x = np.column_stack([grade, rng.normal(size=(n, 12))])
    groups = np.arange(n) % 10
    fitted = core.fit(x, y, np.ones(n), 0, groups=groups, strata=grade, base_columns=[0], signal_columns=[1, 2])
    best_single = min((v, k) for k, v in fitted.scores.items() if k != core.AVERAGE)
    assert best_single[0] < fitted.scores[core.AVERAGE]
    assert fitted.name == core.AVERAGE
    # its cross-validated probabilities are the mean of the candidates'; its predictions lie in [0, 1]
    p = fitted.predict(x, groups)
    assert p.shape == (n,) and ((p >= 0) & (p <= 1)).all()
