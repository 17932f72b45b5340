"""The app's pages in pipeline order. Later features add their view here."""

from __future__ import annotations

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
    return specs
