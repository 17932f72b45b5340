"""Reading replies: strict about grades, tolerant only about the wrapping; ensemble aggregation."""

from __future__ import annotations

import math

import pytest

from workbench.llm.parse import grade_probabilities, parse_reply
from workbench.llm.prompts import load_prompt
from workbench.core.judging.ensemble import aggregate_grades, aggregate_status

RUBRIC = load_prompt("relevance_v1")
BINARY = load_prompt("relevance_binary_v1")
TOKEN = load_prompt("relevance_token_v1")


@pytest.mark.parametrize("text,grade", [
    ('{"reason": "r", "grade": 2}', 2),
    ('{"grade": 0, "reason": "r"}', 0),
    ('```json\n{"reason": "r", "grade": 3}\n```', 3),
    ('Sure! Here it is: {"reason": "has {braces}", "grade": 1} Hope it helps.', 1),
    ('{"reason": "r", "grade": "2"}', 2),
    # SmolLM2 under llama.cpp's json_object+schema grammar: raw newlines inside the string
    ('{ "reason": "}\nThe passage is not about the question.\n\n1. It", "grade" : 0}', 0),
])
def test_valid_rubric_replies(text, grade):
    parsed = parse_reply(RUBRIC, text)
    assert (parsed.grade, parsed.problem) == (grade, None)


@pytest.mark.parametrize("text,problem", [
    ('{"reason": "r", "grade": 7}', "grade 7"),
    ('{"reason": "r", "grade": -1}', "grade -1"),
    ('{"reason": "r", "grade": 2.5}', "grade 2.5"),
    ('{"reason": "r", "grade": true}', "grade true"),
    ('{"reason": "r", "grade": null}', "grade null"),
    ('{"reason": "r", "grade": "high"}', "grade \"high\""),
    ('{"reason": "r"}', "no `grade`"),
    ('The passage is relevant, grade 3.', "no JSON object"),
    ('{"reason": "The passage mentions the topic but the answer was cut', "no JSON object"),
    ("", "empty reply"),
    (None, "empty reply"),
])
def test_invalid_rubric_replies_are_never_a_grade(text, problem):
    parsed = parse_reply(RUBRIC, text)
    assert parsed.grade is None
    assert problem in parsed.problem


@pytest.mark.parametrize("text,grade", [
    ('{"reason": "r", "relevant": true}', 2),
    ('{"reason": "r", "relevant": false}', 0),
    ('{"reason": "r", "relevant": "yes"}', None),
    ('{"reason": "r", "grade": 3}', None),
])
def test_binary_replies_map_to_the_templates_grades(text, grade):
    assert parse_reply(BINARY, text).grade == grade


def test_single_token_probabilities_hand_worked():
    # logprobs ln(0.6), ln(0.3), ln(0.1) for grades 2, 3, 1 (grade 0 absent) and a non-grade token:
    top = [("2", math.log(0.6)), ("3", math.log(0.3)), (" 1", math.log(0.1)), ("x", math.log(0.5))]
    parsed = parse_reply(TOKEN, "2", top)
    assert parsed.grade == 2
    assert parsed.probabilities == pytest.approx({0: 0.0, 1: 0.1, 2: 0.6, 3: 0.3})
    assert parsed.expected_grade == pytest.approx(0 * 0 + 1 * 0.1 + 2 * 0.6 + 3 * 0.3)  # 2.2
    # Only two grade tokens: renormalised over them, ln(0.2) and ln(0.2) -> 0.5 each.
    probs, expected = grade_probabilities([("0", math.log(0.2)), ("3", math.log(0.2))], (0, 1, 2, 3))
    assert probs == pytest.approx({0: 0.5, 1: 0.0, 2: 0.0, 3: 0.5}) and expected == pytest.approx(1.5)
    assert grade_probabilities(None, (0, 1, 2, 3)) == (None, None)


@pytest.mark.parametrize("text", ["5", "two", "2 because", "", "23"])
def test_single_token_rejects_anything_but_one_grade_digit(text):
    assert parse_reply(TOKEN, text).grade is None


@pytest.mark.parametrize("grades,method,grade,spread", [
    ([2, 2, 3], "majority", 2, 1.0),
    ([3, 1, 3], "majority", 3, 2.0),
    ([1, 2], "majority", 1, 1.0),            # tie: both 0.5 from the mean 1.5 -> the lower
    ([0, 3, 3, 0, 2], "majority", 3, 3.0),   # tie 0/3, mean 1.6: 3 is 1.4 away, 0 is 1.6 away
    ([2, None, 2], "majority", 2, 0.0),      # a failed sample does not vote
    ([1, 2], "mean", 2, 1.0),                # 1.5 rounds half up
    ([0, 1, 1], "mean", 1, 1.0),             # 0.667 -> 1
    ([0, 0, 1], "mean", 0, 1.0),             # 0.333 -> 0
    ([None, None], "majority", None, None),
])
def test_aggregate_grades_hand_worked(grades, method, grade, spread):
    assert aggregate_grades(grades, method) == (grade, spread)


def test_aggregate_status():
    assert aggregate_status(["failed", "ok"]) == "ok"
    assert aggregate_status(["failed", "invalid"]) == "failed"
    assert aggregate_status(["invalid", "invalid"]) == "invalid"
