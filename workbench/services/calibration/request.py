"""One calibration-sample request for every front end: the frozen :class:`SampleRequest`, its one
check (:meth:`SampleRequest.check`) and its one resolution (:meth:`SampleRequest.resolve`).

``workbench calibrate sample``, ``Project.calibration_sample`` and the Calibration page's draw form
only *build* a request and :meth:`SampleRequest.run` it. The rules, each one line naming its
field (``{field:KEY}``, worded by each front end):

- ``pool``: required (the judged pool to sample from);
- ``size``: None (``[calibration] sample_size``) or a whole number of pairs, at least 1; the
  pairs design asks for at least ``SampleSpec.floor_size`` (100, the core's rule,
  :class:`workbench.core.calibration.sample.SampleSpec`; the queries design ignores ``size``);
- ``seed``: a whole number from 0 to 2**63 - 1 (it is stored as a 64-bit integer; numpy's
  generators take no negative seed);
- ``design``: ``pairs`` or ``queries``; ``queries`` (the number of queries to draw, at least 2)
  is required by the queries design and refused by the pairs design;
- ``holdout_share``: None (``[calibration] holdout_share``) or a share in (0, 1];
- ``name``: None or empty (``POOL-seedS``, ``POOL-queries-seedS`` for the queries design) or text;
- ``judge``, ``model``, ``prompt_hash``: None or text (which judge configuration's grades
  stratify the sample; an unknown one is refused by the draw, which knows the project).

:meth:`SampleRequest.resolve` decides every default once (the name, the size, the share, and
``threshold``, the relevant grade ``[calibration] relevant_min_grade``), so the three front ends
draw the same sample from the same request and settings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from workbench.config import DEFAULTS
from workbench.core.calibration.sample import SampleSpec
from workbench.errors import ConfigError, InputError
from workbench.services.request_values import share, text, whole

if TYPE_CHECKING:
    from workbench.config import Settings
    from workbench.store.database import Database

DESIGNS = ("pairs", "queries")
#: Largest seed: the seed is stored as a BIGINT.
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class SampleRequest:
    """What a calibration sample is asked to be (see the module doc for the rules); None: the
    configured default. ``threshold`` is not an option of any front end: :meth:`resolve` sets it."""

    pool: str
    size: int | None = None
    seed: int = 0
    design: str = "pairs"
    queries: int | None = None
    holdout_share: float | None = None
    name: str | None = None
    judge: str | None = None
    model: str | None = None
    prompt_hash: str | None = None
    threshold: int | None = None

    # -- the one check ---------------------------------------------------------------------------
    def check(self) -> SampleRequest:
        """Refuse a request that breaks a rule of the module doc (one line naming the field);
        returns the request, so a front end can write ``SampleRequest(...).check()``."""
        text(self.pool, "pool")
        if not self.pool or not self.pool.strip():
            raise ConfigError("name the judged pool to sample from: {set_field:pool}", field="pool")
        for key in ("name", "judge", "model", "prompt_hash"):
            text(getattr(self, key), key)
        if self.size is not None:
            self._check_size(self.size)
        whole(self.seed, "seed", low=0, high=MAX_SEED)
        if self.design not in DESIGNS:
            raise ConfigError(f"{{field:design}} must be pairs or queries, got {self.design!r}", field="design")
        if self.design == "queries" and self.queries is None:
            raise ConfigError("{field:design queries} needs {field:queries N}, the number of queries to draw "
                              "(e.g. {field:queries 30})", field=("design", "queries"))
        if self.design == "pairs" and self.queries is not None:
            raise ConfigError("{field:queries} is a {field:design queries} option; add {field:design queries} "
                              "to sample queries", field=("queries", "design"))
        if self.queries is not None:
            whole(self.queries, "queries", low=2)
        if self.holdout_share is not None:
            share(self.holdout_share, "holdout_share")
        return self

    def _check_size(self, size: object) -> int:
        """A whole number of pairs, at least 1; for the pairs design at least the core's floor
        (``SampleSpec.floor_size``), said before the draw reads the pool (bad input, as the draw
        says it)."""
        size = whole(size, "size", low=1)
        floor = SampleSpec.floor_size
        if self.design == "pairs" and size < floor:
            raise InputError(f"a calibration sample of {size} pairs is too small; ask for at least {floor} "
                             f"with {{field:size}}", field="size")
        return size

    def default_name(self) -> str:
        """``POOL-seedS`` (``POOL-queries-seedS`` for the queries design)."""
        return f"{self.pool}{'-queries' if self.design == 'queries' else ''}-seed{int(self.seed)}"

    # -- the one resolution ------------------------------------------------------------------------
    def resolve(self, settings: Settings | None = None) -> SampleRequest:
        """The checked request with every default decided from ``settings`` (``[calibration]``;
        None: the built-in defaults), each configured value checked by the same rule."""
        self.check()

        def configured(key: str):
            return DEFAULTS["calibration"][key] if settings is None else settings.get("calibration", key)

        name = self.name.strip() if self.name and self.name.strip() else self.default_name()
        size = self.size if self.size is not None else configured("sample_size")
        holdout = self.holdout_share if self.holdout_share is not None else configured("holdout_share")
        threshold = self.threshold if self.threshold is not None else configured("relevant_min_grade")
        return replace(self, name=name, size=self._check_size(size), holdout_share=share(holdout, "holdout_share"),
                       threshold=whole(threshold, "threshold", low=0), seed=int(self.seed))

    def run(self, db: Database, settings: Settings | None = None) -> dict:
        """Draw and store the sample :meth:`resolve` decides
        (:func:`workbench.services.calibration.samples.create_sample`); its summary."""
        from workbench.services.calibration.samples import create_sample

        r = self.resolve(settings)
        return create_sample(db, r.name, r.pool, size=r.size, seed=r.seed, holdout_share=r.holdout_share,
                             threshold=r.threshold, model=r.model, prompt_hash=r.prompt_hash, design=r.design,
                             queries=r.queries, judge=r.judge)
