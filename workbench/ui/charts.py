"""Charts given as Vega-Lite specs: the spec ``st.altair_chart`` would send, written as a dict.

``st.altair_chart`` builds the chart's Altair objects, converts them with ``to_dict`` and
validates the result against the whole Vega-Lite JSON schema on every page run (20-60 ms of
CPU per chart, for a spec known when the page is written). :func:`vega_lite` sends the same
element: the frame as a named Arrow dataset (named by the hash of its bytes, as Streamlit's
Altair conversion names it) and the spec with the same ``$schema``; Streamlit adds the same
``autosize`` and theme to both. Write the spec Altair's ``to_dict`` gives for the chart.
"""

from __future__ import annotations

import streamlit as st
from streamlit import dataframe_util
from streamlit.util import calc_hash

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"  # what the installed Altair writes


def vega_lite(frame, spec: dict, **kwargs) -> None:
    """Show ``spec`` (a Vega-Lite view, layer or facet without data) drawn from ``frame``;
    ``kwargs`` go to ``st.vega_lite_chart`` (``width="stretch"`` as for ``st.altair_chart``)."""
    data = dataframe_util.convert_anything_to_arrow_bytes(frame)
    name = calc_hash(data)
    st.vega_lite_chart(spec={"$schema": SCHEMA, "data": {"name": name}, **spec, "datasets": {name: data}},
                       **kwargs)
