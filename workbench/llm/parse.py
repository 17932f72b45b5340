"""Reading the judge's answer: strict validation, tolerant only about the wrapping.

A reply is *valid* when it yields a grade among the template's grades. Tolerated wrapping: code
fences, text around one JSON object, raw control characters (newlines) inside its strings, a
grade written as a digit string (``"2"``). Never
tolerated (the reply is *invalid*, with the problem named): no JSON object, a missing or
out-of-range grade (``5``, ``-1``, ``2.5``, ``true``), a non-boolean ``relevant``. An invalid reply
is never turned into a grade.

Single-token templates read one digit; when the response carries token log-probabilities, the
probability of each grade is ``p_g = exp(lp_g) / sum_h exp(lp_h)`` over the grade tokens among
the top candidates of the first token (grades absent from the list get 0), and the expected grade
is ``sum_g g * p_g``. The recorded grade is the digit the model produced, not the argmax.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from workbench.llm.prompts import PromptTemplate


@dataclass(frozen=True)
class Parsed:
    """``grade`` is None exactly when ``problem`` says why the reply is invalid."""

    grade: int | None
    reason: str | None = None
    problem: str | None = None
    probabilities: dict[int, float] | None = None
    expected_grade: float | None = None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _json_object(text: str) -> dict | None:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    # strict=False: raw control characters (a newline) inside a string are read as text; llama.cpp's
    # JSON grammar lets a model write them, and they change nothing about the grade.
    decoder = json.JSONDecoder(strict=False)
    for candidate in candidates:
        stripped = candidate.strip()
        for start in [i for i, ch in enumerate(stripped) if ch == "{"][:20]:
            try:
                value, _ = decoder.raw_decode(stripped[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _grade_value(value, allowed: tuple[int, ...]) -> tuple[int | None, str | None]:
    if isinstance(value, bool) or value is None:
        return None, f"grade {json.dumps(value)} is not one of {', '.join(map(str, allowed))}"
    if isinstance(value, str) and re.fullmatch(r"\s*\d\s*", value):
        value = int(value)
    if isinstance(value, int) and value in allowed:
        return value, None
    return None, f"grade {json.dumps(value)} is not one of {', '.join(map(str, allowed))}"


def parse_reply(template: PromptTemplate, text: str | None, top_logprobs: list | None = None) -> Parsed:
    """Validate ``text`` (the assistant message) against ``template``'s output format.

    ``top_logprobs``: for single-token templates, ``[(token, logprob), ...]`` of the first
    generated token.
    """
    if text is None or not text.strip():
        return Parsed(None, problem="empty reply")
    if template.output == "single_token":
        match = re.fullmatch(r"\s*[\"']?(\d)[\"']?\.?\s*", text)
        if not match:
            return Parsed(None, problem=f"expected a single digit, got {text.strip()[:40]!r}")
        grade, problem = _grade_value(int(match.group(1)), template.allowed_grades)
        if problem:
            return Parsed(None, problem=problem)
        probs, expected = grade_probabilities(top_logprobs, template.allowed_grades)
        return Parsed(grade, probabilities=probs, expected_grade=expected)
    obj = _json_object(text)
    if obj is None:
        return Parsed(None, problem="no JSON object in the reply")
    reason = obj.get("reason")
    reason = reason if isinstance(reason, str) else (None if reason is None else json.dumps(reason))
    if template.output == "binary":
        relevant = obj.get("relevant")
        if not isinstance(relevant, bool):
            return Parsed(None, reason=reason, problem=f"`relevant` must be true or false, got {json.dumps(relevant)}")
        key = "relevant_grade" if relevant else "not_relevant_grade"
        return Parsed(template.options[key], reason=reason)
    if "grade" not in obj:
        return Parsed(None, reason=reason, problem="the JSON object has no `grade`")
    grade, problem = _grade_value(obj["grade"], template.allowed_grades)
    if problem:
        return Parsed(None, reason=reason, problem=problem)
    return Parsed(grade, reason=reason)


def grade_probabilities(top_logprobs: list | None, allowed: tuple[int, ...]
                        ) -> tuple[dict[int, float] | None, float | None]:
    """Normalised probabilities of the grade tokens and the expected grade (module doc)."""
    if not top_logprobs:
        return None, None
    best: dict[int, float] = {}
    for token, logprob in top_logprobs:
        key = str(token).strip()
        if len(key) == 1 and key.isdigit() and int(key) in allowed and logprob is not None:
            grade = int(key)
            best[grade] = max(best.get(grade, -math.inf), float(logprob))
    if not best:
        return None, None
    top = max(best.values())
    weights = {g: math.exp(lp - top) for g, lp in best.items()}
    total = sum(weights.values())
    probs = {g: weights.get(g, 0.0) / total for g in allowed}
    return probs, sum(g * p for g, p in probs.items())


def json_schema(template: PromptTemplate) -> dict:
    """The ``response_format`` json_schema for ``template``'s output (not for single tokens)."""
    if template.output == "binary":
        props = {"reason": {"type": "string"}, "relevant": {"type": "boolean"}}
        required = ["reason", "relevant"]
    else:
        props = {"reason": {"type": "string"}, "grade": {"type": "integer", "enum": list(template.allowed_grades)}}
        required = ["reason", "grade"]
    return {"type": "json_schema",
            "json_schema": {"name": "relevance_judgment", "strict": True,
                            "schema": {"type": "object", "properties": props, "required": required,
                                       "additionalProperties": False}}}


def repair_message(template: PromptTemplate, problem: str) -> str:
    """The follow-up user message of the one repair attempt."""
    if template.output == "single_token":
        return f"Your reply was not usable ({problem}). Reply with a single digit: 0, 1, 2 or 3."
    shape = ('{"reason": "<one or two sentences>", "relevant": <true or false>}' if template.output == "binary"
             else '{"reason": "<one or two sentences>", "grade": <0, 1, 2 or 3>}')
    return f"Your reply was not usable ({problem}). Reply with only this JSON object: {shape}"
