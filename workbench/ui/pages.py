"""The app's pages, in pipeline order.

``PAGES`` is the one explicit list: a page whose module fails to import is an error at start-up,
never a page that silently disappears. Adding a page is one line here (its view module exposes
``render()``); put it where its step sits in the pipeline:

    Overview → Data → Queries & Labels → Retrieve & Pool → Judge → Label → Calibration → ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PageSpec:
    title: str
    url_path: str
    module: str  # the view module under workbench.ui.views, exposing render()
    icon: str | None = None
    # The pipeline steps (services.status step keys) this page takes forward.
    steps: tuple[str, ...] = ()

    @property
    def render(self) -> Callable[[], None]:
        return importlib.import_module(f"workbench.ui.views.{self.module}").render


PAGES: tuple[PageSpec, ...] = (
    PageSpec("Overview", "overview", "overview", ":material/home:"),
    PageSpec("Data", "data", "data", ":material/upload_file:", ("corpus",)),
    PageSpec("Queries & Labels", "labels", "browse", ":material/fact_check:"),
    PageSpec("Retrieve & Pool", "retrieve", "retrieve", ":material/manage_search:", ("chunks", "runs", "pool")),
    PageSpec("Judge", "judge", "judge", ":material/gavel:", ("judgments",)),
    PageSpec("Label", "label", "label", ":material/edit_note:"),
    PageSpec("Calibration", "calibration", "calibration", ":material/verified:", ("calibration",)),
    PageSpec("Qrels", "qrels", "qrels", ":material/checklist:", ("qrels",)),
    PageSpec("Evaluate", "evaluate", "evaluate", ":material/leaderboard:", ("evaluation",)),
    PageSpec("Experiments", "experiments", "experiments", ":material/science:"),
    PageSpec("Query kinds", "query-kinds", "query_kinds", ":material/alt_route:"),
)


def page_specs() -> list[PageSpec]:
    """Every page, in order; imports each view module so a broken page fails loudly."""
    for spec in PAGES:
        importlib.import_module(f"workbench.ui.views.{spec.module}")
    return list(PAGES)


def page_for_step(step: str) -> PageSpec | None:
    """The page that takes pipeline step ``step`` forward, if the app has one."""
    return next((spec for spec in PAGES if step in spec.steps), None)
