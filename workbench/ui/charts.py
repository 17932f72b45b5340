"""Charts given as Vega-Lite specs, written as dicts, instead of Altair objects.

``st.altair_chart`` builds the chart's Altair objects, converts them with ``to_dict`` and
validates the result against the whole Vega-Lite JSON schema on every page run (CPU per chart,
docs/performance.md, for a spec known when the page is written). :func:`vega_lite` sends the spec
Altair's ``to_dict`` gives for the chart, with the same ``$schema``, through the public
``st.vega_lite_chart`` (as the Retrieve page's charts do); Streamlit adds the same ``autosize``
and theme to both.
"""

from __future__ import annotations

import streamlit as st

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"  # what the installed Altair writes


def vega_lite(frame, spec: dict, **kwargs) -> None:
    """Show ``spec`` (a Vega-Lite view, layer or facet without data) drawn from ``frame``;
    ``kwargs`` go to ``st.vega_lite_chart`` (``width="stretch"`` as for ``st.altair_chart``)."""
    st.vega_lite_chart(frame, {"$schema": SCHEMA, **spec}, **kwargs)
