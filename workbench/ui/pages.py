"""The app's pages, in pipeline order.

``PAGES`` is the one explicit list: a page whose module fails to import is an error at start-up,
never a page that silently disappears. Adding a page is one line here (its view module exposes
``render()``); put it where its step sits in the pipeline:

    Overview → Data → Queries & Labels → Retrieve & Pool → Judge → Label → Calibration → ...

A page lists the roles whose navigation shows it (``roles``): Data, Judge and Calibration hold
nothing an annotator may do or read (imports, judge jobs and the judge's grades, calibration
reports and samples), so an annotator's navigation leaves them out, and Streamlit then serves
them no page at their address either. That is tidiness, not the guard: every service they call
refuses an annotator by itself (:mod:`workbench.services.access`,
:mod:`workbench.services.visibility`). Retrieve & Pool stays, for its pool peek and run
downloads, which carry no grade.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from workbench.services import access

EVERYONE = frozenset(access.ROLES)
NOT_ANNOTATORS = EVERYONE - {"annotator"}  # lead-only work, which a viewer may still read


@dataclass(frozen=True)
class PageSpec:
    title: str
    url_path: str
    module: str  # the view module under workbench.ui.views, exposing render()
    icon: str | None = None
    # The pipeline steps (services.status step keys) this page takes forward.
    steps: tuple[str, ...] = ()
    # The roles whose navigation lists the page (module doc).
    roles: frozenset[str] = EVERYONE

    @property
    def render(self) -> Callable[[], None]:
        return importlib.import_module(f"workbench.ui.views.{self.module}").render


PAGES: tuple[PageSpec, ...] = (
    PageSpec("Overview", "overview", "overview", ":material/home:"),
    PageSpec("Data", "data", "data", ":material/upload_file:", ("corpus",), NOT_ANNOTATORS),
    PageSpec("Queries & Labels", "labels", "browse", ":material/fact_check:"),
    PageSpec("Retrieve & Pool", "retrieve", "retrieve", ":material/manage_search:", ("chunks", "runs", "pool")),
    PageSpec("Judge", "judge", "judge", ":material/gavel:", ("judgments",), NOT_ANNOTATORS),
    PageSpec("Label", "label", "label", ":material/edit_note:"),
    PageSpec("Calibration", "calibration", "calibration", ":material/verified:", ("calibration",), NOT_ANNOTATORS),
    PageSpec("Qrels", "qrels", "qrels", ":material/checklist:", ("qrels",)),
    PageSpec("Evaluate", "evaluate", "evaluate", ":material/leaderboard:", ("evaluation",)),
    PageSpec("Experiments", "experiments", "experiments", ":material/science:"),
    PageSpec("Query kinds", "query-kinds", "query_kinds", ":material/alt_route:"),
)


def page_specs(actor: access.Actor | None = None) -> list[PageSpec]:
    """The pages the navigation of ``actor`` (default: the running call's,
    :func:`workbench.services.access.current_actor`) lists, in order: those whose ``roles``
    hold the actor's role (outside a page session, the local operator, a lead: every page).
    Imports every view module, listed or not, so a broken page fails loudly."""
    for spec in PAGES:
        importlib.import_module(f"workbench.ui.views.{spec.module}")
    return [spec for spec in PAGES if shown_to(spec, actor)]


def shown_to(spec: PageSpec, actor: access.Actor | None = None) -> bool:
    """Whether ``actor``'s navigation (default: the running call's) lists page ``spec``."""
    return (access.current_actor() if actor is None else actor).role in spec.roles


def page_for_step(step: str) -> PageSpec | None:
    """The page that takes pipeline step ``step`` forward, if the app has one."""
    return next((spec for spec in PAGES if step in spec.steps), None)
