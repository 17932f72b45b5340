"""The app's pages in pipeline order. Later features add their view here."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PageSpec:
    title: str
    url_path: str
    render: Callable[[], None]
    icon: str | None = None


def page_specs() -> list[PageSpec]:
    from workbench.ui.views import overview

    specs = [PageSpec("Overview", "overview", overview.render, ":material/home:")]
    # Pipeline pages, in order; each module exposes render().
    for module_name, title, url_path, icon in (
        ("data", "Data", "data", ":material/upload_file:"),
        ("retrieve", "Retrieve & Pool", "retrieve", ":material/manage_search:"),
    ):
        try:
            module = importlib.import_module(f"workbench.ui.views.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"workbench.ui.views.{module_name}":
                raise
            continue  # page not built yet
        specs.append(PageSpec(title, url_path, module.render, icon))
    return specs
