"""The standard-library and third-party modules the package defers, imported on their first use.

pandas, numpy, pyarrow, scipy, scikit-learn, torch, onnxruntime, sentence-transformers and the
like cost tens to hundreds of milliseconds to import, and several are optional extras. Code that
needs one reads ``lazylibs.pandas`` (``lazylibs.sklearn_linear_model`` for ``sklearn.linear_model``:
the module's path, dots as underscores) and this module imports it the first time the attribute
is read (a module ``__getattr__``, PEP 562), then keeps it as a plain global; a missing optional
library raises its ``ModuleNotFoundError`` at that read, where the caller words it. Modules a
layer owns (duckdb, openai, streamlit) are imported by their owner, not here. The
``TYPE_CHECKING`` imports give type checkers the real modules and give
tests/test_architecture.py the edges it checks; a test there holds them equal to :data:`MODULES`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import shlex
    import socket
    import textwrap

    import pandas
    import tqdm

# attribute -> the module it names, imported by the first access (PEP 562)
MODULES = {
    "pandas": "pandas",
    "shlex": "shlex",
    "socket": "socket",
    "textwrap": "textwrap",
    "tqdm": "tqdm",
}


def __getattr__(name: str) -> ModuleType:
    if name not in MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(MODULES[name])
    globals()[name] = module  # later reads skip this function
    return module
