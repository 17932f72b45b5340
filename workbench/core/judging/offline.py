"""The offline judge: a transparent, non-LLM baseline grader for query–passage pairs.

It is named ``offline-lexical`` (``offline-lexical+embedding`` when the caller passes an embedding
similarity) everywhere a grade it made is stored or shown, and it is never presented as an LLM.
It exists so the whole workflow runs with no API key and no server; its agreement with SME labels
is modest and is printed in the README ("Offline judge"), measured by
``benchmarks/offline_judge_agreement.py``.

Terms. Text is lower-cased and split on anything that is not a letter or digit; a small built-in
stopword list (question words included) is removed; a light suffix stemmer folds plurals and
``-ing``/``-ed``/``-ly`` forms and a final ``e`` (``cycles``, ``cycle`` -> ``cycl``). A query made
only of stopwords keeps all of its words instead.

Features (all in [0, 1] except the phrase length):

- ``coverage`` = |Q ∩ P| / |Q| over the query's distinct terms Q and the passage's terms P. With
  ``idf`` (a mapping term -> weight from corpus statistics), the idf-weighted share
  Σ_{t∈Q∩P} idf(t) / Σ_{t∈Q} idf(t) is used instead; a term missing from ``idf`` gets the largest
  weight in it (unseen means rare).
- ``description_coverage``: the same share for the query's description (what a good answer must
  contain), when one is given; otherwise it is not used and its weight moves to ``coverage``.
- ``longest_phrase``: the longest run of consecutive query terms that also occurs consecutively in
  the passage (both after stopword removal), in words; ``phrase = min(longest_phrase, 4) / 4``.
- ``embedding``: the caller's cosine similarity of the two texts clipped to [0, 1] (a negative
  cosine counts as 0).

Score and grade::

    lexical = w_q·coverage + w_d·description_coverage + w_p·phrase      (weights sum to 1)
    score   = lexical                                  without an embedding similarity
    score   = (1 − w_e)·lexical + w_e·embedding        with one
    grade   = 3 if score ≥ t3, 2 if score ≥ t2, 1 if score ≥ t1, else 0

with the ``TUNED_SETTINGS`` for the input (with or without a description, with or without an
embedding similarity), all tuned on the demo's SME labels; the README says how well that
generalises. Two rules override the thresholds: an empty passage (no terms) grades 0,
and a passage holding every query term grades at least 1. The score is non-decreasing in each
feature, so adding query words to a passage never lowers its grade.

Edge cases: an empty query (no terms at all) grades 0 with a reason saying so. Pure function: no
I/O, no randomness.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from workbench.core.stopwords import STOPWORDS

MODEL_LEXICAL = "offline-lexical"
MODEL_LEXICAL_EMBEDDING = "offline-lexical+embedding"
RULES_VERSION = 1  # bump when the tokeniser, stemmer or formula changes

_TOKEN = re.compile(r"[a-z0-9]+")
_KEEP_DOUBLE = frozenset("lsz")


@functools.lru_cache(maxsize=1 << 16)  # a corpus repeats its words: the judge stems each once
def stem(word: str) -> str:
    """A light suffix stemmer: ``policies`` -> ``policy``, ``refreshed`` -> ``refresh``.

    Rules, first match only, and only when at least 3 letters remain: ``ies``/``ied`` -> ``y``;
    ``sses`` -> ``ss``; ``es`` after s/x/z/ch/sh -> removed; ``ing``, ``edly``, ``ed``, ``ly``
    -> removed; a final ``s`` (not ``ss``/``us``/``is``) -> removed. Then a doubled final
    consonant left by ``-ing``/``-ed`` is halved (``running`` -> ``run``) and a final ``e`` is
    dropped (``cycle`` and ``cycles`` meet at ``cycl``). Numbers and words of 3 letters or fewer
    are left alone.
    """
    if len(word) <= 3 or word.isdigit():
        return word
    stripped_verb = False
    for suffix, replacement in (("ies", "y"), ("ied", "y"), ("sses", "ss")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            return word[: -len(suffix)] + replacement
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")) and len(word) > 5:
        word = word[:-2]
    else:
        for suffix in ("ing", "edly", "ed", "ly"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                stripped_verb = True
                break
        else:
            if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
                word = word[:-1]
    if stripped_verb and len(word) > 3 and word[-1] == word[-2] and word[-1] not in _KEEP_DOUBLE:
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Stemmed content terms of ``text`` in order (stopwords dropped unless asked to keep them)."""
    words = _TOKEN.findall(text.lower())
    return [stem(w) for w in words if keep_stopwords or w not in STOPWORDS]


def _query_terms(text: str) -> list[str]:
    found = terms(text)
    return found if found else terms(text, keep_stopwords=True)


def longest_shared_run(query: list[str], passage: list[str]) -> int:
    """Length of the longest run of consecutive query terms found consecutively in the passage.

    Dynamic programming over the two sequences (longest common substring), O(|q|·|p|) time and
    O(|p|) memory; queries are short, so this is cheap.
    """
    if not query or not passage:
        return 0
    best = 0
    previous = [0] * (len(passage) + 1)
    for q in query:
        current = [0] * (len(passage) + 1)
        for j, p in enumerate(passage, start=1):
            if q == p:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


@dataclass(frozen=True)
class OfflineJudgeSettings:
    """Weights and grade thresholds; the defaults are documented in the module docstring."""

    query_weight: float
    description_weight: float
    phrase_weight: float
    embedding_weight: float
    threshold_1: float
    threshold_2: float
    threshold_3: float

    @property
    def thresholds(self) -> tuple[float, float, float]:
        return (self.threshold_1, self.threshold_2, self.threshold_3)


# Tuned on the demo's 209 SME labels by ``benchmarks/offline_judge_agreement.py --tune`` (grid:
# weights in steps of 0.1, thresholds in steps of 0.05, maximising Cohen's kappa on the 4 grades),
# one setting per kind of input. The description (what a good answer must contain) carries most of
# the signal when there is one; the shared-phrase weight came out at or near 0 and is kept as a
# feature for the reason only. In-sample and cross-validated agreement are in the README.
TUNED_SETTINGS: Mapping[tuple[bool, bool], OfflineJudgeSettings] = {
    # (has description, has embedding similarity)
    (True, False): OfflineJudgeSettings(0.1, 0.9, 0.0, 0.0, 0.05, 0.30, 0.55),
    (False, False): OfflineJudgeSettings(0.9, 0.0, 0.1, 0.0, 0.05, 0.20, 0.55),
    (True, True): OfflineJudgeSettings(0.0, 1.0, 0.0, 0.3, 0.10, 0.30, 0.55),
    (False, True): OfflineJudgeSettings(1.0, 0.0, 0.0, 0.8, 0.40, 0.50, 0.65),
}


def settings_fingerprint() -> str:
    """SHA-256 of everything that decides a grade here (settings, stopwords, rules version): the
    offline judge's "prompt hash", so grades from a retuned judge are never mixed with old ones."""
    text = json.dumps({
        "version": RULES_VERSION,
        "settings": {f"{d}:{e}": asdict(s) for (d, e), s in sorted(TUNED_SETTINGS.items())},
        "stopwords": sorted(STOPWORDS),
    }, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_settings(*, with_description: bool, with_embedding: bool) -> OfflineJudgeSettings:
    """The tuned settings for the kind of input a pair has."""
    return TUNED_SETTINGS[(with_description, with_embedding)]


@dataclass(frozen=True)
class OfflineGrade:
    """A grade with its plain-language reason, the features it came from, and the judge's name."""

    grade: int
    reason: str
    features: Mapping[str, float] = field(default_factory=dict)
    model: str = MODEL_LEXICAL


def _share(wanted: list[str], present: set[str], idf: Mapping[str, float] | None) -> tuple[float, list[str]]:
    distinct = list(dict.fromkeys(wanted))
    if not distinct:
        return 0.0, []
    missing = [t for t in distinct if t not in present]
    if idf:
        fallback = max(idf.values())
        total = sum(idf.get(t, fallback) for t in distinct)
        found = sum(idf.get(t, fallback) for t in distinct if t in present)
        return (found / total if total > 0 else 0.0), missing
    return (len(distinct) - len(missing)) / len(distinct), missing


def score_to_grade(score: float, settings: OfflineJudgeSettings) -> int:
    """0–3 from the thresholds: the number of thresholds the score reaches."""
    return sum(score >= t for t in settings.thresholds)


def grade_pair(
    query: str,
    passage: str,
    *,
    description: str | None = None,
    embedding_similarity: float | None = None,
    idf: Mapping[str, float] | None = None,
    settings: OfflineJudgeSettings | None = None,
) -> OfflineGrade:
    """Grade one pair offline; see the module docstring for the formula and the override rules.

    ``settings`` defaults to ``default_settings(...)`` for the input: with or without a description
    (one with at least one term), with or without an embedding similarity.
    """
    model = MODEL_LEXICAL if embedding_similarity is None else MODEL_LEXICAL_EMBEDDING
    query_terms = _query_terms(query)
    passage_terms = terms(passage)
    passage_all = terms(passage, keep_stopwords=True)
    present = set(passage_all)  # a stopword-only query may match passage stopwords
    if not query_terms:
        return OfflineGrade(0, "The query has no words to compare; graded 0.", {"score": 0.0}, model)
    if not passage_all:
        return OfflineGrade(0, "The passage is empty; graded 0.", {"score": 0.0, "query_terms": float(len(set(query_terms)))}, model)

    coverage, missing = _share(query_terms, present, idf)
    # the reason names missing terms as the query wrote them, not as stems
    spelled: dict[str, str] = {}
    for word in _TOKEN.findall(query.lower()):
        spelled.setdefault(stem(word), word)
    missing = [spelled.get(t, t) for t in missing]
    distinct_query = list(dict.fromkeys(query_terms))
    matched = len(distinct_query) - len(missing)
    longest = longest_shared_run(query_terms, passage_terms if terms(query) else passage_all)
    phrase = min(longest, 4) / 4

    features: dict[str, float] = {
        "query_terms": float(len(distinct_query)),
        "matched_terms": float(matched),
        "coverage": coverage,
        "longest_phrase": float(longest),
    }
    description_terms = terms(description) if description else []
    if settings is None:
        settings = default_settings(with_description=bool(description_terms),
                                    with_embedding=embedding_similarity is not None)
    if description_terms:
        description_coverage, _ = _share(description_terms, present, idf)
        features["description_terms"] = float(len(set(description_terms)))
        features["description_coverage"] = description_coverage
        lexical = (settings.query_weight * coverage + settings.description_weight * description_coverage
                   + settings.phrase_weight * phrase)
    else:
        # no description: its weight (0 in the tuned query-only settings) moves to the query coverage
        lexical = (settings.query_weight + settings.description_weight) * coverage + settings.phrase_weight * phrase
    features["lexical_score"] = lexical
    score = lexical
    if embedding_similarity is not None:
        embedding = max(0.0, min(1.0, float(embedding_similarity)))
        features["embedding_similarity"] = float(embedding_similarity)
        score = (1 - settings.embedding_weight) * lexical + settings.embedding_weight * embedding
    features["score"] = score

    grade = score_to_grade(score, settings)
    floor_note = ""
    if matched == len(distinct_query) and grade < 1:
        grade, floor_note = 1, " Every query term is present, so at least 1."
    features["grade"] = float(grade)
    return OfflineGrade(grade, _reason(features, missing, grade, floor_note, idf is not None), features, model)


def _reason(features: Mapping[str, float], missing: list[str], grade: int, floor_note: str, weighted: bool) -> str:
    parts = [f"{int(features['matched_terms'])} of {int(features['query_terms'])} query terms found"]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        parts[0] += f" (missing: {shown})"
    if weighted:
        parts.append(f"idf-weighted coverage {features['coverage']:.2f}")
    longest = int(features["longest_phrase"])
    parts.append(f"longest shared phrase {longest} word{'s' if longest != 1 else ''}")
    if "description_coverage" in features:
        parts.append(f"{features['description_coverage']:.0%} of the description's terms found")
    if "embedding_similarity" in features:
        parts.append(f"embedding similarity {features['embedding_similarity']:.2f}")
    return (
        "; ".join(parts)
        + f". Score {features['score']:.2f} gives grade {grade} (offline lexical baseline, not an LLM)."
        + floor_note
    )
