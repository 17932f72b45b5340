"""Measures as value objects: parse, print, and the registry of known measures.

A :class:`Measure` names one per-query score, e.g. ``ndcg@10`` or ``precision(rel=2)@10``.
It prints in the project's canonical spelling and parses both that spelling and the usual
ir_measures / trec_eval spellings, so ``Measure.parse("nDCG@10") == Measure.parse("ndcg@10")
== Measure.parse("ndcg_cut_10")``.

Grammar (whitespace ignored)::

    NAME [ "(" key=value {"," key=value} ")" ] [ "@" CUTOFF ]

``CUTOFF`` is a positive integer (a rank depth). The single exception is ``rbp@0.8``: a number
strictly between 0 and 1 after ``rbp`` is its persistence ``p``. trec_eval names such as
``ndcg_cut_10``, ``ndcg_cut.10``, ``P_10`` and ``recall.100`` are accepted as well.

Parameters
    ``rel``    relevance threshold for this measure (overrides the evaluation's ``rel``); on the
               graded measures (ndcg, ndcg_exp, err, graded rbp) grades below it count as 0.
    ``p``      RBP persistence, default 0.8.
    ``gmax``   top grade of the scale for ERR and graded RBP, default 3.
    ``graded`` RBP only: use grade/gmax instead of 0/1 relevance.
    ``dcg``    ir_measures' nDCG gain: ``'log2'`` (linear, default) or ``'exp-log2'`` (= ndcg_exp).

Unknown names and parameters raise :class:`MeasureError` listing what is known.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from workbench.errors import InputError

DEFAULT_RBP_P = 0.8
DEFAULT_GMAX = 3


class MeasureError(InputError, ValueError):
    """A measure name or parameter that cannot be understood."""


@dataclass(frozen=True)
class MeasureInfo:
    """What the registry knows about one measure family."""

    name: str
    description: str
    cutoff: str  # "required", "optional" or "none"
    params: frozenset[str] = field(default_factory=frozenset)
    graded: bool = False  # uses grades rather than the binary rel threshold


REGISTRY: dict[str, MeasureInfo] = {
    m.name: m
    for m in [
        MeasureInfo("hit", "1 if a relevant doc is in the top k (success@k)", "required", frozenset({"rel"})),
        MeasureInfo("precision", "relevant in top k / k", "required", frozenset({"rel"})),
        MeasureInfo("recall", "relevant in top k / R", "required", frozenset({"rel"})),
        MeasureInfo("f1", "2PR/(P+R) at k", "required", frozenset({"rel"})),
        MeasureInfo("mrr", "reciprocal rank of the first relevant doc (within k)", "optional", frozenset({"rel"})),
        MeasureInfo("map", "average precision (within k), divided by R", "optional", frozenset({"rel"})),
        MeasureInfo("ndcg", "nDCG with linear gain g (within k)", "optional", frozenset({"rel"}), True),
        MeasureInfo("ndcg_exp", "nDCG with gain 2^g - 1 (within k); ir_measures' nDCG(dcg='exp-log2')", "optional",
                    frozenset({"rel"}), True),
        MeasureInfo("rprec", "precision at rank R", "none", frozenset({"rel"})),
        MeasureInfo("err", "expected reciprocal rank (Chapelle 2009), satisfaction (2^g - 1)/2^gmax", "optional",
                    frozenset({"rel", "gmax"}), True),
        MeasureInfo(
            "rbp", "rank-biased precision, binary (graded=True: grade/gmax), reported with two residuals: "
            "NAME.residual = p^n for a list of n results, the spec's definition (0.33 on its worked example); "
            "NAME.residual_unjudged = p^n plus the weight of the unjudged ranks, trec_eval's rbp_resid "
            "(0.63 there when d7 and d9 are unjudged)", "none",
            frozenset({"rel", "p", "gmax", "graded"})
        ),
        MeasureInfo("bpref", "Buckley & Voorhees bpref as trec_eval", "none", frozenset({"rel"})),
        MeasureInfo("judged", "share of the top min(k, retrieved) docs with a label", "required", frozenset()),
    ]
}

# Lower-cased alias -> canonical name. ir_measures, ranx, pytrec_eval and common spellings.
ALIASES: dict[str, str] = {
    "hit": "hit", "hits": "hit", "hit_rate": "hit", "success": "hit", "hitrate": "hit",
    "precision": "precision", "p": "precision",
    "recall": "recall", "r": "recall",
    "f1": "f1", "f": "f1",
    "mrr": "mrr", "rr": "mrr", "recip_rank": "mrr", "reciprocal_rank": "mrr",
    "map": "map", "ap": "map", "map_cut": "map",
    "ndcg": "ndcg", "ndcg_cut": "ndcg",
    "ndcg_exp": "ndcg_exp", "ndcg_burges": "ndcg_exp",
    "rprec": "rprec", "r-precision": "rprec", "r_precision": "rprec",
    "err": "err",
    "rbp": "rbp",
    "bpref": "bpref",
    "judged": "judged",
}

#: Each parameter's default, as the measures table prints it.
PARAMETER_DEFAULTS = {"rel": "the evaluation's rel (1)", "p": str(DEFAULT_RBP_P), "gmax": str(DEFAULT_GMAX),
                      "graded": "False"}


def _grades(info: MeasureInfo) -> str:
    if info.graded:
        return "graded"
    if "rel" not in info.params:
        return "any label"
    return "binary, or graded with `graded=True`" if "graded" in info.params else "binary"


def measures_table() -> str:
    """The measures table of ``docs/metrics.md`` (Markdown), one row per measure of
    :data:`REGISTRY` in its order: the canonical spellings (``NAME@k`` when the cutoff is
    required, ``NAME`` and ``NAME@k`` when optional), the other names :data:`ALIASES` accepts,
    the parameters with their defaults, whether grades are used, and the description."""
    rows = ["| Measure | Also accepted | Parameters (default) | Grades | Definition |",
            "|---|---|---|---|---|"]
    for info in REGISTRY.values():
        spelled = {"required": [f"{info.name}@k"], "optional": [info.name, f"{info.name}@k"],
                   "none": [info.name]}[info.cutoff]
        aliases = [a for a, name in ALIASES.items() if name == info.name and a != info.name]
        params = [f"`{key}` = {PARAMETER_DEFAULTS[key]}" for key in PARAMETER_DEFAULTS if key in info.params]
        rows.append(f"| {', '.join(f'`{x}`' for x in spelled)} | {', '.join(f'`{a}`' for a in aliases) or '-'} "
                    f"| {', '.join(params) or '-'} | {_grades(info)} | {info.description} |")
    return "\n".join(rows) + "\n"


_SYNTAX = re.compile(
    r"""^(?P<name>[A-Za-z][A-Za-z0-9_\-]*?)
        (?:[_.](?P<te>\d+))?                 # trec_eval style ndcg_cut_10 / P.10
        (?:\((?P<params>[^()]*)\))?
        (?:@(?P<at>[0-9.]+))?$""",
    re.VERBOSE,
)


def _known() -> str:
    return ", ".join(REGISTRY)


def _parse_value(raw: str, text: str) -> object:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if raw in ("True", "true"):
        return True
    if raw in ("False", "false"):
        return False
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        raise MeasureError(f"measure {text!r}: cannot read parameter value {raw!r}") from None


@dataclass(frozen=True)
class Measure:
    """One measure with its parameters. ``None`` means "use the default".

    ``str(m)`` is the canonical spelling and ``Measure.parse(str(m)) == m``.
    """

    name: str
    cutoff: int | None = None
    rel: int | None = None
    p: float | None = None
    gmax: int | None = None
    graded: bool = False

    def __post_init__(self) -> None:
        info = REGISTRY.get(self.name)
        if info is None:
            raise MeasureError(f"unknown measure {self.name!r}; known measures: {_known()}")
        if info.cutoff == "required" and self.cutoff is None:
            raise MeasureError(f"measure {self.name!r} needs a cutoff, e.g. {self.name}@10")
        if info.cutoff == "none" and self.cutoff is not None:
            raise MeasureError(f"measure {self.name!r} takes no cutoff (@{self.cutoff})")
        if self.cutoff is not None and self.cutoff < 1:
            raise MeasureError(f"measure {self.name!r}: cutoff must be >= 1, got {self.cutoff}")
        if self.name == "rbp" and self.p is None:
            object.__setattr__(self, "p", DEFAULT_RBP_P)  # so RBP and RBP(p=0.8) are equal
        if self.p is not None and not 0.0 < self.p < 1.0:
            raise MeasureError(f"measure {self.name!r}: p must be strictly between 0 and 1")
        if self.gmax is not None and self.gmax < 1:
            raise MeasureError(f"measure {self.name!r}: gmax must be >= 1")

    @property
    def info(self) -> MeasureInfo:
        return REGISTRY[self.name]

    @property
    def persistence(self) -> float:
        return DEFAULT_RBP_P if self.p is None else self.p

    @property
    def top_grade(self) -> int:
        return DEFAULT_GMAX if self.gmax is None else self.gmax

    def __str__(self) -> str:
        params = []
        if self.rel is not None:
            params.append(f"rel={self.rel}")
        if self.name == "rbp":
            params.append(f"p={self.persistence:g}")
        if self.gmax is not None:
            params.append(f"gmax={self.gmax}")
        if self.graded:
            params.append("graded=True")
        text = self.name + (f"({','.join(params)})" if params else "")
        return text + (f"@{self.cutoff}" if self.cutoff is not None else "")

    @classmethod
    def parse(cls, text: str | Measure) -> Measure:
        """Parse a native, ir_measures or trec_eval spelling into a :class:`Measure`."""
        if isinstance(text, Measure):
            return text
        if not isinstance(text, str):
            raise MeasureError(f"a measure must be a string, got {type(text).__name__}")
        compact = re.sub(r"\s+", "", text)
        match = _SYNTAX.match(compact)
        if not match:
            raise MeasureError(
                f"cannot read measure {text!r}; write NAME[(key=value,...)][@k], e.g. ndcg@10"
            )
        raw_name = match["name"].lower()
        name = ALIASES.get(raw_name)
        if name is None:
            raise MeasureError(f"unknown measure {text!r}; known measures: {_known()}")
        kwargs: dict[str, object] = {}
        if match["params"]:
            for item in match["params"].split(","):
                if not item:
                    continue
                key, sep, value = item.partition("=")
                if not sep:
                    raise MeasureError(f"measure {text!r}: parameter {item!r} is not key=value")
                kwargs[key] = _parse_value(value, text)
        # ir_measures' nDCG(dcg='exp-log2') is our ndcg_exp.
        dcg = kwargs.pop("dcg", None)
        if dcg is not None:
            if name != "ndcg" or dcg not in ("log2", "exp-log2"):
                raise MeasureError(f"measure {text!r}: dcg must be 'log2' or 'exp-log2' on nDCG")
            if dcg == "exp-log2":
                name = "ndcg_exp"
        info = REGISTRY[name]
        unknown = set(kwargs) - info.params
        if unknown:
            allowed = ", ".join(sorted(info.params)) or "none"
            raise MeasureError(
                f"measure {text!r}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                f"{name} accepts: {allowed}"
            )
        cutoff_text = match["te"] or match["at"]
        if match["te"] and match["at"]:
            raise MeasureError(f"measure {text!r}: two cutoffs")
        if name == "rbp" and match["te"]:
            cutoff_text = "0." + match["te"]  # ranx spells RBP(p=0.8) as rbp.8
        cutoff: int | None = None
        if cutoff_text is not None:
            if name == "rbp" and "." in cutoff_text:
                kwargs.setdefault("p", _parse_value(cutoff_text, text))
            elif cutoff_text.isdigit():
                cutoff = int(cutoff_text)
            else:
                raise MeasureError(f"measure {text!r}: cutoff must be a whole number")
        for key in ("rel", "gmax"):
            if key in kwargs and not isinstance(kwargs[key], int) or isinstance(kwargs.get(key), bool):
                raise MeasureError(f"measure {text!r}: {key} must be an integer")
        if "p" in kwargs:
            if isinstance(kwargs["p"], bool) or not isinstance(kwargs["p"], (int, float)):
                raise MeasureError(f"measure {text!r}: p must be a number")
            kwargs["p"] = float(kwargs["p"])
        if "graded" in kwargs and not isinstance(kwargs["graded"], bool):
            raise MeasureError(f"measure {text!r}: graded must be True or False")
        return cls(name, cutoff, **kwargs)  # type: ignore[arg-type]


def parse_measures(measures: str | Measure | Sequence[str | Measure]) -> list[tuple[str, Measure]]:
    """Parse a measure or a list of them into ``(name as given, Measure)`` pairs, deduplicated."""
    if isinstance(measures, (str, Measure)):
        measures = [measures]
    out: list[tuple[str, Measure]] = []
    seen: set[str] = set()
    for item in measures:
        measure = Measure.parse(item)
        label = item if isinstance(item, str) else str(measure)
        if label not in seen:
            seen.add(label)
            out.append((label, measure))
    if not out:
        raise MeasureError(f"no measure given; known measures: {_known()}")
    return out
