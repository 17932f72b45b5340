"""The demo's ``acronym`` query tag follows one stated rule applied to the query text alone.

Rule: a query is tagged ``"acronym": true`` when its text holds an acronym or code, i.e. a token
of two or more characters that starts with a capital letter and continues with capitals or digits
and has a second capital or a digit (``IT``, ``PTO``, ``CVE``, ``SEV2``); ``OK`` is an ordinary
word, not a term, and does not count. Queries without one carry no ``acronym`` key. The rule was
applied to the text, not chosen from which queries hybrid search helps.
"""

from __future__ import annotations

import json
import re

from workbench.resources import DEMO_DIR

ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]*(?:[A-Z][A-Z0-9]*|[0-9])\b")
NOT_TERMS = {"OK"}


def acronyms(text: str) -> list[str]:
    return [t for t in ACRONYM.findall(text) if t not in NOT_TERMS]


def test_the_rule_on_hand_written_examples():
    assert acronyms("When is the postmortem due after a SEV2?") == ["SEV2"]
    assert acronyms("Can I carry unused PTO over?") == ["PTO"]
    assert acronyms("Is it OK to email a customer's details?") == []
    assert acronyms("I'm off. Can I use a VPN, SSO or 2FA?") == ["VPN", "SSO"]  # 2FA starts with a digit
    assert acronyms("Harbor Street office in Portugal") == []
    assert acronyms("A") == [] and acronyms("I") == []


def test_acronym_tag_equals_the_rule_on_every_demo_query():
    queries = [json.loads(line) for line in (DEMO_DIR / "queries.jsonl").read_text().splitlines() if line.strip()]
    tagged = {q["query_id"] for q in queries if q["tags"].get("acronym") is True}
    by_rule = {q["query_id"] for q in queries if acronyms(q["text"])}
    assert tagged == by_rule
    assert sorted(tagged) == ["q007", "q019", "q021", "q031", "q035"]  # IT, PTO, PTO, CVE, SEV2
    assert all(q["tags"].get("acronym") in (None, True) for q in queries)
    assert len(queries) == 44
