"""Measure value objects: parsing of native / ir_measures / trec_eval spellings, printing, errors."""

from __future__ import annotations

import pytest

from workbench.core.metrics.measures import REGISTRY, Measure, MeasureError, parse_measures
from workbench.errors import InputError

SAME = [
    ("ndcg@10", Measure("ndcg", 10)),
    ("nDCG@10", Measure("ndcg", 10)),
    ("ndcg_cut_10", Measure("ndcg", 10)),
    ("ndcg_cut.10", Measure("ndcg", 10)),
    ("nDCG", Measure("ndcg")),
    ("nDCG(dcg='exp-log2')@10", Measure("ndcg_exp", 10)),
    ("ndcg_burges@5", Measure("ndcg_exp", 5)),
    ("P@10", Measure("precision", 10)),
    ("P_10", Measure("precision", 10)),
    ("P(rel=2)@10", Measure("precision", 10, rel=2)),
    ("precision@5", Measure("precision", 5)),
    ("R@100", Measure("recall", 100)),
    ("R(rel=2)@100", Measure("recall", 100, rel=2)),
    ("recall_100", Measure("recall", 100)),
    ("AP", Measure("map")),
    ("map", Measure("map")),
    ("AP@100", Measure("map", 100)),
    ("AP(rel=2)@100", Measure("map", 100, rel=2)),
    ("map_cut_100", Measure("map", 100)),
    ("RR", Measure("mrr")),
    ("recip_rank", Measure("mrr")),
    ("RR@10", Measure("mrr", 10)),
    ("RR(rel=2)@10", Measure("mrr", 10, rel=2)),
    ("mrr@10", Measure("mrr", 10)),
    ("Success@10", Measure("hit", 10)),
    ("success_10", Measure("hit", 10)),
    ("hit_rate@1", Measure("hit", 1)),
    ("hit@3", Measure("hit", 3)),
    ("f1@5", Measure("f1", 5)),
    ("Rprec", Measure("rprec")),
    ("r-precision", Measure("rprec")),
    ("Bpref", Measure("bpref")),
    ("Judged@10", Measure("judged", 10)),
    ("ERR@10", Measure("err", 10)),
    ("err(gmax=4)@20", Measure("err", 20, gmax=4)),
    ("RBP(p=0.8)", Measure("rbp", p=0.8)),
    ("rbp@0.9", Measure("rbp", p=0.9)),
    ("rbp.95", Measure("rbp", p=0.95)),
    ("RBP(rel=2,p=0.5)", Measure("rbp", rel=2, p=0.5)),
    ("rbp(graded=True)", Measure("rbp", graded=True)),
    (" ndcg @ 10 ", Measure("ndcg", 10)),
]


@pytest.mark.parametrize("text,expected", SAME, ids=[t for t, _ in SAME])
def test_parse(text, expected):
    assert Measure.parse(text) == expected


@pytest.mark.parametrize("measure", [m for _, m in SAME])
def test_print_parse_round_trip(measure):
    assert Measure.parse(str(measure)) == measure


def test_canonical_spellings():
    assert str(Measure.parse("nDCG@10")) == "ndcg@10"
    assert str(Measure.parse("P(rel=2)@10")) == "precision(rel=2)@10"
    assert str(Measure.parse("RBP")) == "rbp(p=0.8)"
    assert str(Measure.parse("RR")) == "mrr"


def test_measures_are_hashable_values():
    assert len({Measure.parse("P@10"), Measure.parse("precision@10"), Measure.parse("P_10")}) == 1


def test_unknown_name_lists_known_ones():
    with pytest.raises(MeasureError) as err:
        Measure.parse("nDGC@10")
    message = str(err.value)
    assert "nDGC@10" in message
    for name in REGISTRY:
        assert name in message
    assert isinstance(err.value, InputError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("P", "needs a cutoff"),
        ("rprec@10", "takes no cutoff"),
        ("P@0", "cutoff must be >= 1"),
        ("P@1.5", "whole number"),
        ("P(foo=1)@10", "unknown parameter"),
        ("P(rel=x)@10", "cannot read parameter value"),
        ("P(rel=1.5)@10", "rel must be an integer"),
        ("RBP(p=1.5)", "strictly between 0 and 1"),
        ("nDCG(dcg='exp')@10", "dcg must be"),
        ("ndcg@@10", "cannot read measure"),
        ("", "cannot read measure"),
        ("P(rel)@10", "not key=value"),
    ],
)
def test_bad_measures_say_what_is_wrong(text, fragment):
    with pytest.raises(MeasureError, match=fragment):
        Measure.parse(text)


def test_parse_measures_keeps_labels_as_given_and_dedupes():
    parsed = parse_measures(["nDCG@10", "P@10", "nDCG@10", Measure("recall", 5)])
    assert [label for label, _ in parsed] == ["nDCG@10", "P@10", "recall@5"]
    assert parse_measures("AP") == [("AP", Measure("map"))]
    with pytest.raises(MeasureError, match="no measure"):
        parse_measures([])
